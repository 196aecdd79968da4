package runner

import (
	"runtime/debug"

	"github.com/evalmesh/evalmesh/attest"
)

// ModulePath is evalmesh's module, named when a binary carries no build information.
const ModulePath = "github.com/evalmesh/evalmesh"

// Build names the evalmesh build of this process, as run attestations record it: the main
// module's path and version, and the VCS revision `go build` stamps in a git checkout
// (-buildvcs=auto; `go run` and `go test` binaries carry none, so Revision is then empty).
func Build() attest.BuildInfo {
	b := attest.BuildInfo{Module: ModulePath, Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// executorInfo is what the run attestation says of the executor that ran the agent: what
// the executor reports it enforced on that task (ContainmentReporter), or, for one that
// cannot say, a host process without limits.
func executorInfo(ex Executor, h *Handle) *attest.ExecutorInfo {
	c := Containment{Isolation: attest.IsolationProcess, Limits: "none"}
	if cr, ok := ex.(ContainmentReporter); ok && h != nil {
		c = cr.Containment(h)
	}
	return &attest.ExecutorInfo{Name: ex.Name(), Isolation: c.Isolation, Limits: c.Limits, SeparateUID: c.SeparateUID}
}
