package runner

import (
	"runtime/debug"

	"github.com/evalmesh/evalmesh/attest"
)

// ModulePath is evalmesh's module, named when a binary carries no build information.
const ModulePath = "github.com/evalmesh/evalmesh"

// buildRevision and buildModified are set by `make build` (-ldflags -X) for the builds the
// go command does not stamp itself: a git worktree (its .git is a file, which the go
// command does not recognise as a checkout: golang/go#58218) or GOFLAGS=-buildvcs=false.
var buildRevision, buildModified string

// Build names the evalmesh build of this process, as run attestations record it: the main
// module's path and version, and the VCS revision `go build` stamps in a git checkout
// (vcs.revision, vcs.modified) or else `make build` passes in. `go run` and `go test`
// binaries carry none: Revision is then empty.
func Build() attest.BuildInfo {
	b := attest.BuildInfo{Module: ModulePath, Version: "(devel)"}
	b.Revision, b.Modified = buildRevision, buildModified == "true"
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
	return &attest.ExecutorInfo{Name: ex.Name(), Isolation: c.Isolation, Limits: c.Limits, SeparateUID: c.SeparateUID, Engine: c.Engine, Partition: c.Partition, Node: c.Node}
}
