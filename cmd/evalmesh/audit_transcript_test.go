package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// TestDishonestLabForgingTranscriptsIsCaughtByAudits: three labs of real `evalmesh daemon`
// processes run a deterministic agent that talks to a model (the example ReAct agent and
// the stand-in model, in containers of the local Docker engine, the runner recording their
// traffic), under a network document with ledger.audits on. lab3's daemon forges
// (--test-forge-transcript): each run it signs carries the agent's own submission but a
// transcript of its first model call only. Re-scores agree and the submissions match, so
// nothing but the transcript tells the runs apart; the honest labs' audits carry their
// re-executions' transcript shapes and the ledger finds them different (attest.JudgeAudit).
// Once audits complete, on every node: lab3 is listed for misconduct with its results set
// aside, every honest run still counts, and the report's audits of lab3's runs are proven
// mismatches whose reason is the transcript shape.
func TestDishonestLabForgingTranscriptsIsCaughtByAudits(t *testing.T) {
	skipShortFaults(t)
	cli := executortest.DockerClient(t)
	image := executortest.GoImage(t, cli, "evalmesh-test-audit-react", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/react"}, {Name: "model", Package: "./examples/agents/cmd/standin-model"}}, nil)
	// Rate 2, replication: every run is re-executed by both other labs. The forged runs'
	// scores equal the honest ones', so at a sampling rate their draws are those of any run
	// (0.1 per lab at rate 0.2): the test would hang on whether a draw fell, and CI saw it
	// miss (one audit in 7 minutes, of an honest run). Which runs get drawn is the
	// fabrication test's and the audit simulator's subject; this one's is the transcript.
	c := startAuditedCluster(t, cli, daemonWithModelProxy(t), func(cfg *home.Config) { cfg.Runner.Models.Images = []string{image} }, protocol.AuditPolicy{Rate: 2},
		map[int][]string{2: {"--test-forge-transcript"}})
	tasks := c.addTasks("sentiment")
	liarLab := c.labs.Nodes[2].Lab.ID

	model := &agentspec.Model{Name: "standin", Image: image, Port: 8000, ReadyPath: "/health",
		Command: []string{"/model", "serve", "--addr", "127.0.0.1:8000", "--model", "standin"},
		Probe:   []string{"/model", "probe"}, ReadyTimeoutSeconds: 60}
	react := &agentspec.Spec{Name: "react", Version: "1.0.0", Image: image, Command: []string{"/agent"}, Model: model, Deterministic: true}
	slots, id := c.campaignOf(1, "transcripts audited", tasks, []*agentspec.Spec{react}, 6)
	c.waitAllDone(c.nodes, id, slots)
	stored := c.settle("every run stored everywhere", 180*time.Second, func(v ledgerView) bool { return len(v.all) >= slots })[0]
	forged := 0
	for _, r := range stored.all {
		if r.lab == liarLab {
			forged++
		}
	}
	if forged == 0 {
		t.Fatalf("lab3 claimed none of the %d slots: nothing forged to catch (claims are drawn; rerun)", slots)
	}
	// The hook did what the test says: lab3's runs carry a transcript of one call, the
	// honest labs' runs the agent's whole conversation.
	envs, err := c.nodes[0].client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string][]int{} // lab ID → its runs' transcript calls
	for _, env := range envs {
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		st, run, _, err := attest.DecodeStatement(e.Payload)
		if err != nil || run == nil {
			continue
		}
		s, _, ok := attest.TranscriptShapeOf(st)
		if !ok {
			t.Fatalf("%s signed run %s without a transcript subject: %+v", run.Lab, attest.EnvelopeID(env), st.Subject)
		}
		calls[run.Lab] = append(calls[run.Lab], s.Calls)
	}
	for lab, cs := range calls {
		for _, n := range cs {
			if liar := lab == liarLab; (liar && n != 1) || (!liar && n < 2) {
				t.Fatalf("runs' transcript calls by lab %v: want 1 for lab3's (%s), 2 or more for the others'", calls, liarLab)
			}
		}
	}

	views := c.settleSetAside("lab3's forged transcripts proven by audits and set aside", liarLab)
	l, err := c.nodes[0].client.MeshLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	shapeProof := 0
	for _, a := range l.Report.Audits {
		switch {
		case a.RunLab == liarLab && a.Outcome == "proven" && a.Verdict == attest.VerdictMismatch:
			if !strings.HasPrefix(a.Reason, attest.ReasonShapeMismatch) {
				t.Errorf("audit %s of lab3's run %s: reason %q, want the transcript shape alone (the submissions match)", a.ID, a.Run, a.Reason)
			}
			shapeProof++
		case a.RunLab != liarLab && a.Verdict != attest.VerdictMatch:
			t.Errorf("an honest run %s audited as %s by %s: %s", a.Run, a.Verdict, a.Lab, a.Reason)
		}
	}
	if shapeProof < 2 {
		t.Fatalf("ledger report audits %+v: want lab3's runs proven by two labs' transcript mismatches", l.Report.Audits)
	}
	t.Logf("%d runs (%d forged), %d audits in the report, %d proving lab3's transcripts forged; root %.12s",
		len(views[0].all), forged, len(l.Report.Audits), shapeProof, views[0].root)
}

// daemonWithModelProxy is a copy of this test binary in a folder of its own with the model
// proxy beside it, where a node looks for it (runner.ProxyBinaryName): daemons started from
// it record their agents' model traffic.
func daemonWithModelProxy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for src, name := range map[string]string{self: "evalmesh", executortest.StaticBinary(t, "./cmd/evalmesh-model-proxy"): runner.ProxyBinaryName} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "evalmesh")
}
