package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// create → add-lab → two of three labs sign → show says a majority signed, the hash is
// the document's, signing leaves the hash alone, an edit clears the signatures; the
// daemon's loader takes the document only once a majority signed it.
func TestNetworkCLI(t *testing.T) {
	dir := t.TempDir()
	labDir := func(n string) string { return filepath.Join(dir, n) }
	for _, n := range []string{"acme", "beta", "gamma"} {
		mustCLI(t, "lab", "init", "--dir", labDir(n), "--name", n)
	}
	doc := filepath.Join(dir, "network.json")
	mustCLI(t, "network", "create", "--network", "airs", "--out", doc, "--replication", "1", "--lab", labDir("acme"), "--lab", labDir("beta"))
	if code, _, stderr := cliRun(t, "network", "create", "--network", "airs", "--out", doc); code == 0 || !strings.Contains(stderr, "exists") {
		t.Fatalf("create over an existing file: exit %d, %s", code, stderr)
	}
	mustCLI(t, "network", "add-lab", doc, "--lab", labDir("gamma"))
	show := func() networkShowOut {
		t.Helper()
		var s networkShowOut
		if err := json.Unmarshal([]byte(mustCLI(t, "network", "show", doc, "--json")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	unsigned := show()
	if len(unsigned.Labs) != 3 || unsigned.Signatures.Majority || !unsigned.SignaturesField || unsigned.Ledger.Replication != 1 {
		t.Fatalf("after create and add-lab: %+v", unsigned)
	}
	h, err := home.Resolve(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	install := func() (networkPolicy, error) {
		t.Helper()
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.NetworkDocPath(), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return loadNetworkPolicy(h, "airs")
	}
	mustCLI(t, "network", "sign", doc, "--lab", labDir("acme"))
	_, err = install()
	if err == nil || !strings.Contains(err.Error(), "signed by acme, not by beta, gamma") || !strings.Contains(err.Error(), "evalmesh network sign") {
		t.Fatalf("one of three signed: loader said %v", err)
	}
	mustCLI(t, "network", "sign", doc, "--lab", labDir("beta"))
	signed := show()
	if !signed.Signatures.Majority || strings.Join(signed.Signatures.Signers, ",") != "acme,beta" || signed.Hash != unsigned.Hash {
		t.Fatalf("two of three signed: %+v (hash before signing %s)", signed, unsigned.Hash)
	}
	if got := strings.TrimSpace(mustCLI(t, "network", "hash", doc)); got != signed.Hash {
		t.Fatalf("network hash %s, show %s", got, signed.Hash)
	}
	np, err := install()
	if err != nil || np.Doc.Hash() != signed.Hash || np.Warn != "" {
		t.Fatalf("two of three signed: loader %v, %+v", err, np)
	}
	// Retiring gamma changes the document: the signatures go, the loader refuses it again.
	mustCLI(t, "network", "retire-lab", doc, "--name", "gamma", "--at", "2026-06-01T00:00:00Z")
	retired := show()
	if retired.Hash == signed.Hash || len(retired.Signatures.Signers) != 0 || retired.Labs[2].Retired == nil {
		t.Fatalf("after retire-lab: %+v", retired)
	}
	if _, err := install(); err == nil {
		t.Fatal("the loader took a document nobody signed since its last edit")
	}
	// The document from before signatures still runs, with the warning.
	var legacy map[string]any
	raw, _ := os.ReadFile(doc)
	if err := json.Unmarshal(raw, &legacy); err != nil {
		t.Fatal(err)
	}
	delete(legacy, "signatures")
	raw, _ = json.Marshal(legacy)
	if err := os.WriteFile(doc, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	np, err = install()
	if err != nil || !strings.Contains(np.Warn, "network document is not signed by a majority of its labs (see evalmesh network sign)") {
		t.Fatalf("document without signatures: %v, warn %q", err, np.Warn)
	}
}

// A real daemon refuses to start on a document that a majority of its labs has not signed,
// and one started on a signed document announces its hash in its heads.
func TestDaemonNetworkDocumentSignatures(t *testing.T) {
	c := newCluster(t, 3)
	l := c.labs.Nodes[0]
	d, err := protocol.ParseNetworkDoc(c.labs.Doc.File())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.SignedByMajority(); !ok {
		t.Fatal("demo.NewLabs wrote a document its labs did not sign")
	}
	d.Signatures = d.Signatures[:1]
	if err := home.WriteFileAtomic(l.Home.NetworkDocPath(), d.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "daemon", "--home", l.Home.Dir)
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "not in effect") || !strings.Contains(string(out), "signed by lab1, not by lab2, lab3") {
		t.Fatalf("daemon on a document signed by one of three labs: %v\n%s", err, out)
	}
	if err := home.WriteFileAtomic(l.Home.NetworkDocPath(), c.labs.Doc.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := c.start(0)
	st, err := p.client.LedgerStatus(ctx)
	if err != nil || st.NetworkDoc != c.labs.Doc.Hash() {
		t.Fatalf("daemon on the signed document announces %q (%v), want %s", st.NetworkDoc, err, c.labs.Doc.Hash())
	}
}

// A retired lab against an honest daemon: lab3 retired half an hour ago, in a document the
// other two signed. It hand-signs two runs with its own node key under a certificate of
// its own: one claiming a time before the retirement (kept, as the network document says a
// retired lab keeps its earlier results), one claiming now (refused: lab retired). Its
// node's certificate is refused live (claims, heads' certificates) from the retirement on.
func TestRetiredLabAgainstHonestDaemon(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	now := time.Now().UTC().Truncate(time.Second)
	retired := now.Add(-30 * time.Minute)
	d, err := protocol.ParseNetworkDoc(c.labs.Doc.File())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RetireLab("lab3", retired); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if err := d.Sign(c.labs.Nodes[i].Name, c.labs.Nodes[i].Lab); err != nil {
			t.Fatal(err)
		}
	}
	honest := c.labs.Nodes[0]
	if err := home.WriteFileAtomic(honest.Home.NetworkDocPath(), d.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := c.start(0)

	// lab3's own key re-certifies its node from two hours ago: the earlier run lies in it.
	liar := c.labs.Nodes[2]
	key, err := liar.Home.Identity()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := liar.Lab.Certify(liar.PeerID, now.Add(-2*time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sign := func(seed int, start, end time.Time) string {
		t.Helper()
		score := 0.9
		pred := attest.RunPredicate{Slot: attest.Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: seed},
			Node: liar.PeerID, Lab: liar.Lab.ID, Start: start, End: end, Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
			Executor: &attest.ExecutorInfo{Name: "process", Isolation: attest.IsolationProcess, Limits: "none"}}
		st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)},
			Annotations: map[string]any{attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, pred)
		if err != nil {
			t.Fatal(err)
		}
		return signInto(t, key, cert, st, dir)
	}
	before := sign(0, now.Add(-time.Hour), now.Add(-50*time.Minute))
	after := sign(1, now.Add(-time.Minute), now)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := importAttestations(ctx, p.client, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.New != 1 || rep.Refused != 1 || rep.Refusals[0].ID != after || rep.Refusals[0].Reason != string(attest.ReasonLabRetired) {
		t.Fatalf("import of the retired lab's runs: %+v; want %s kept and %s refused as %q", rep, before, after, attest.ReasonLabRetired)
	}
	// Live, its node's certificate no longer vouches for anything.
	ts, err := d.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.CheckNodeCert(cert.Raw(), now); attest.ReasonOf(err) != attest.ReasonLabRetired {
		t.Fatalf("live certificate check of the retired lab's node: %v", err)
	}
}

// Two of three labs run a newer document (all three signed it); the third lab's node still
// runs the old one. Once it has heard the others' certified nodes claim and announce the
// newer document, it says so at WARN and in its ledger status (doctor), and claims
// nothing; the two others, the majority, go on and finish the campaign.
func TestNetworkDocumentMismatchStopsClaims(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	newer, err := protocol.ParseNetworkDoc(c.labs.Doc.File())
	if err != nil {
		t.Fatal(err)
	}
	newer.Ledger.BootstrapRounds = 50
	newer.Signatures = []protocol.NetworkSignature{}
	for _, l := range c.labs.Nodes {
		if err := newer.Sign(l.Name, l.Lab); err != nil {
			t.Fatal(err)
		}
	}
	if newer.Hash() == c.labs.Doc.Hash() {
		t.Fatal("fixture: the newer document has the old hash")
	}
	for _, i := range []int{1, 2} {
		if err := home.WriteFileAtomic(c.labs.Nodes[i].Home.NetworkDocPath(), newer.File(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	tasks := c.addTasks("arithmetic")
	// The first campaign's claims tell lab1's node who the others' nodes are.
	first, slots := c.publish(c.nodes[1], tasks, faultAgents, 2)
	old := c.nodes[0]
	testutil.WaitFor(t, 60*time.Second, "lab1's node sees the majority's other document", func() bool {
		st, err := old.client.LedgerStatus(t.Context())
		return err == nil && st.DocumentMajority != nil && st.DocumentMajority.Mismatch && st.DocumentMajority.Majority == newer.Hash()
	})
	testutil.WaitFor(t, 10*time.Second, "the WARN line", func() bool {
		return strings.Contains(readLog(old.log), "level=WARN") && strings.Contains(readLog(old.log), "network document mismatch")
	})
	for _, i := range []int{1, 2} {
		st, err := c.nodes[i].client.LedgerStatus(t.Context())
		if err != nil || (st.DocumentMajority != nil && st.DocumentMajority.Mismatch) {
			t.Fatalf("%s (majority) halted: %+v %v", c.labs.Nodes[i].Name, st.DocumentMajority, err)
		}
	}
	c.waitAllDone(c.nodes[1:], first, slots)
	// A campaign published once it halted: the majority runs all of it, lab1's node none.
	env, second, err := c.labs.Campaign(1, "after the halt", tasks, faultAgents, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[1].client.PublishCampaign(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	c.waitAllDone(c.nodes[1:], second, len(tasks)*len(faultAgents)*4)
	envs, err := c.nodes[1].client.StoredEnvelopes(t.Context(), vstore.SetAttestations)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, run, _, err := attest.DecodeStatement(e.Payload); err == nil && run != nil && run.Node == old.peerID && run.Slot.Campaign == second {
			t.Fatalf("lab1's node ran slot %v of the campaign published after it halted", run.Slot)
		}
	}
}

// network create --executors writes the isolation kinds that count (process runs only where
// asked) and refuses a kind it does not know, naming it.
func TestNetworkCreateExecutors(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, "lab", "init", "--dir", filepath.Join(dir, "acme"), "--name", "acme")
	show := func(doc string) []string {
		t.Helper()
		var s networkShowOut
		if err := json.Unmarshal([]byte(mustCLI(t, "network", "show", doc, "--json")), &s); err != nil {
			t.Fatal(err)
		}
		return s.Ledger.Executors
	}
	plain, trial := filepath.Join(dir, "plain.json"), filepath.Join(dir, "trial.json")
	mustCLI(t, "network", "create", "--network", "airs", "--out", plain, "--lab", filepath.Join(dir, "acme"))
	mustCLI(t, "network", "create", "--network", "airs", "--out", trial, "--executors", "container,process", "--lab", filepath.Join(dir, "acme"))
	if got := show(plain); !slices.Equal(got, []string{"container"}) {
		t.Errorf("default executors %v, want [container]", got)
	}
	if got := show(trial); !slices.Equal(got, []string{"container", "process"}) {
		t.Errorf("--executors container,process gave %v", got)
	}
	code, _, stderr := cliRun(t, "network", "create", "--network", "airs", "--out", filepath.Join(dir, "bad.json"), "--executors", "vm")
	if code == 0 || !strings.Contains(stderr, `"vm"`) {
		t.Errorf("--executors vm: exit %d, %s (want a refusal naming vm)", code, stderr)
	}
}

// network create writes the per-lab caps at admission on (protocol.DefaultCaps).
func TestNetworkCreateWritesCaps(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, "lab", "init", "--dir", filepath.Join(dir, "acme"), "--name", "acme")
	out := filepath.Join(dir, "network.json")
	mustCLI(t, "network", "create", "--network", "airs", "--out", out, "--lab", filepath.Join(dir, "acme"))
	d, err := networkRead(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Ledger.Caps == nil || *d.Ledger.Caps != protocol.DefaultCaps {
		t.Fatalf("caps %+v, want %+v", d.Ledger.Caps, protocol.DefaultCaps)
	}
	if p := d.AcceptPolicy(); p.MaxAgentsPerLab != protocol.DefaultCaps.AgentsPerLab || p.MaxCampaignsPerLab != protocol.DefaultCaps.CampaignsPerLab {
		t.Fatalf("policy %+v", p)
	}
	if show := mustCLI(t, "network", "show", out); !strings.Contains(show, fmt.Sprintf("at most %d agents, at most %d campaigns", protocol.DefaultCaps.AgentsPerLab, protocol.DefaultCaps.CampaignsPerLab)) {
		t.Fatalf("network show does not state the caps:\n%s", show)
	}
}

// network create --limits enforced writes ledger.limits, which the document's acceptance
// policy applies; an unknown value is refused, naming the values.
func TestNetworkCreateLimits(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, "lab", "init", "--dir", filepath.Join(dir, "acme"), "--name", "acme")
	doc := filepath.Join(dir, "strict.json")
	mustCLI(t, "network", "create", "--network", "airs", "--out", doc, "--limits", "enforced", "--lab", filepath.Join(dir, "acme"))
	var s networkShowOut
	if err := json.Unmarshal([]byte(mustCLI(t, "network", "show", doc, "--json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Ledger.Limits != "enforced" {
		t.Errorf("--limits enforced wrote ledger.limits %q", s.Ledger.Limits)
	}
	code, _, stderr := cliRun(t, "network", "create", "--network", "airs", "--out", filepath.Join(dir, "bad.json"), "--limits", "sometimes")
	if code == 0 || !strings.Contains(stderr, "ledger.limits") || !strings.Contains(stderr, "enforced") {
		t.Errorf("--limits sometimes: exit %d, %s (want a refusal naming the values)", code, stderr)
	}
}
