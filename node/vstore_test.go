package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
)

// Runs the node's own runner wrote while the daemon was down enter the store at start.
func TestNodeImportsLocalRunsAtStart(t *testing.T) {
	f, trust := vstoretest.Lab(t, "acme")
	h := newHome(t)
	if err := os.MkdirAll(h.AttestationsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, e := range vstoretest.SignRuns(t, f, 0, 3) {
		if err := os.WriteFile(filepath.Join(h.AttestationsDir(), fmt.Sprintf("run-%d.json", i)), e, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions()
	o.Trust = trust
	n := startNodeAt(t, h, o)
	if got := n.Store().Attestations().Len(); got != 3 {
		t.Fatalf("%d stored at start, want the 3 local runs", got)
	}
}
