package verify

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// A counted run of a sealed task, on a node that holds no key grant for it (a reviewer's),
// is named as not re-scored with that reason, before its submission is asked for; the same
// run against the open bundle is not: it goes on to its submission (the fixture's CID,
// "bafkreisub", is no CID, so that is where it stops).
func TestRescoreNamesASealedRunItHoldsNoKeyFor(t *testing.T) {
	gen := t.TempDir()
	if _, err := exampletasks.Generate(gen); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(gen, "arithmetic")
	sealed := filepath.Join(t.TempDir(), "arithmetic.sealed")
	if _, err := tasks.Seal(open, sealed); err != nil {
		t.Fatal(err)
	}
	f, err := attestgen.New("laba")
	if err != nil {
		t.Fatal(err)
	}
	env, err := f.Run(0)
	if err != nil {
		t.Fatal(err)
	}
	id := attest.EnvelopeID(env)
	names := protocol.LedgerNames{TaskNames: map[string]string{"bafytask": "arithmetic"}}
	o := Options{Runner: &runner.Runner{}, Clock: clock.Real(), FetchTimeout: time.Second}

	var rep Report
	rescore(context.Background(), &fakeNode{}, o, id, env, map[string]string{"bafytask": sealed}, names, &rep)
	if len(rep.NotRescored) != 1 || rep.Rescored != 0 {
		t.Fatalf("sealed: re-scored %d, not re-scored %+v; want the run named", rep.Rescored, rep.NotRescored)
	}
	n := rep.NotRescored[0]
	if n.Attestation != id || n.Lab != f.Lab.ID || n.Task != "arithmetic" || !strings.HasPrefix(n.Reason, "sealed task: this node holds no key grant for bundle bafytask") {
		t.Errorf("sealed: not re-scored %+v; want run %s of %s, task arithmetic, no key grant for bafytask", n, id, f.Lab.ID)
	}

	rep = Report{}
	rescore(context.Background(), &fakeNode{}, o, id, env, map[string]string{"bafytask": open}, names, &rep)
	if len(rep.NotRescored) != 1 || !strings.HasPrefix(rep.NotRescored[0].Reason, `submission CID "bafkreisub"`) {
		t.Errorf("open: not re-scored %+v; want it stopped at its submission, past the sealed check", rep.NotRescored)
	}
}
