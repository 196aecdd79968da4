package demo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents"
	"github.com/evalmesh/evalmesh/examples/demo"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/scoring"
)

func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "agent" {
		os.Exit(agents.Run(os.Args[2], os.Args[3:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	res, err := demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 3, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	// 3 tasks × 4 baselines × 3 seeds, and the HeurekaBench task × 2 co-scientists × 3 seeds.
	if len(res.Runs) != 3*4*3+2*3 || res.Verified != len(res.Runs) {
		t.Fatalf("%d runs, %d verified", len(res.Runs), res.Verified)
	}
	// Mean score per (task, agent): the baselines differ visibly, in the expected order.
	type key struct{ task, agent string }
	sum, n := map[key]float64{}, map[key]int{}
	lower := map[string]bool{"SyntheticRegressionMAE": true}
	invalid := map[string]int{}
	for _, r := range res.Runs {
		if !r.Valid {
			invalid[r.Agent]++
			continue
		}
		sum[key{r.Task, r.Agent}] += *r.Score
		n[key{r.Task, r.Agent}]++
	}
	for _, task := range []string{"ArithmeticWordProblemsAccuracy", "SyntheticRegressionMAE", "ReviewSentimentAccuracy"} {
		mean := func(a string) float64 { return sum[key{task, a}] / float64(n[key{task, a}]) }
		c, h, s := mean("constant"), mean("heuristic"), mean("solver")
		better := func(a, b float64) bool {
			if lower[task] {
				return a < b
			}
			return a > b
		}
		if !better(s, h) || !better(h, c) {
			t.Errorf("%s: solver %.3f, heuristic %.3f, constant %.3f: not in order of skill", task, s, h, c)
		}
	}
	if invalid["flaky"] != 6 || invalid["solver"] != 1 || len(invalid) != 2 {
		t.Errorf("invalid runs by agent %v, want flaky's 6 (seeds 1 and 2 on 3 tasks) and solver's 1 (regression seed 0)", invalid)
	}
	// The leaderboard ranks the solver first among agents and shows flaky's lower VSR.
	rank := map[string]int{}
	for _, a := range res.Ledger.Agents {
		rank[a.Agent] = a.Rank
		if a.Agent == "flaky" && (a.ValidSubmissionRate == nil || *a.ValidSubmissionRate > 0.34) {
			t.Errorf("flaky valid-submission rate %v", a.ValidSubmissionRate)
		}
	}
	if rank["solver"] >= rank["heuristic"] || rank["heuristic"] >= rank["constant"] {
		t.Errorf("ranks %v", rank)
	}
	if len(res.Ledger.Root()) != 64 {
		t.Errorf("ledger root %q", res.Ledger.Root())
	}
	// The HeurekaBench table: the thorough co-scientist above the hasty one on every figure,
	// and the AIRS-Bench rows hold no co-scientist.
	if _, ok := rank["cosci-thorough"]; ok {
		t.Error("a co-scientist is in the AIRS-Bench rows")
	}
	if res.Ledger.Heureka == nil {
		t.Fatal("no HeurekaBench table")
	}
	hrow := map[string]scoring.HeurekaAgent{}
	for _, a := range res.Ledger.Heureka.Agents {
		hrow[a.Agent] = a
	}
	th, ha := hrow["cosci-thorough"], hrow["cosci-hasty"]
	if th.OEQ == nil || ha.OEQ == nil || *th.OEQ <= *ha.OEQ || *th.MCQAccuracy <= *ha.MCQAccuracy ||
		*th.MCQRecall <= *ha.MCQRecall || *th.MCQPrecision <= *ha.MCQPrecision || th.Elo <= ha.Elo || th.ValidRuns != 3 || ha.ValidRuns != 3 {
		t.Errorf("HeurekaBench rows not in order of skill: thorough %+v, hasty %+v", th, ha)
	}
	// Every attestation is in the home under its ID.
	ents, _ := os.ReadDir(filepath.Join(dir, "attestations"))
	if len(ents) != len(res.Runs) {
		t.Errorf("%d attestation files for %d runs", len(ents), len(res.Runs))
	}
	if res.Report.Read != len(res.Runs) || res.Report.Counted != len(res.Runs) || len(res.Report.Refused) != 0 || len(res.Report.Excluded) != 0 {
		t.Errorf("ledger report %+v: want every run read and counted", res.Report)
	}
	if res.LedgerRoot != res.Ledger.Root() {
		t.Errorf("result root %s, ledger root %s", res.LedgerRoot, res.Ledger.Root())
	}
}

// TestDemoTrustChain: the demo's runs are believed only through the lab. The trust file it
// leaves lists the lab's key and no node; every attestation carries the node certificate in
// HOME/node-cert.json, issued by that lab to the demo node and valid now; without the lab in
// the trust store nothing verifies.
func TestDemoTrustChain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	res, err := demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 1,
		Agents: []string{"constant", "flaky"}, Tasks: []string{"arithmetic"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	trust, err := attest.LoadTrust(home.Home{Dir: dir}.TrustPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := trust.Nodes(); len(n) != 0 {
		t.Errorf("trust file trusts nodes directly: %+v", n)
	}
	if labs := trust.Labs(); len(labs) != 1 || labs[0].ID != res.Lab || labs[0].Name != demo.LabName {
		t.Errorf("trust file labs %+v, want only %s (%s)", labs, demo.LabName, res.Lab)
	}
	info, err := attest.LoadLabInfo(filepath.Join(dir, demo.LabDir))
	if err != nil || info.ID != res.Lab {
		t.Fatalf("lab dir: %+v %v, want lab %s", info, err, res.Lab)
	}
	cert, err := attest.LoadNodeCert(filepath.Join(dir, "node-cert.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cert.Lab != res.Lab || cert.Node != res.Node || cert.ID != res.CertID {
		t.Errorf("node-cert.json: lab %s node %s id %s; want lab %s node %s id %s", cert.Lab, cert.Node, cert.ID, res.Lab, res.Node, res.CertID)
	}
	if now := time.Now(); now.Before(cert.NotBefore) || !now.Add(24*time.Hour).Before(cert.NotAfter) {
		t.Errorf("certificate window %s – %s does not cover now and the next day", cert.NotBefore, cert.NotAfter)
	}
	files, refused, err := attest.ReadEnvelopeDir(res.Attestations)
	if err != nil || len(refused) != 0 || len(files) != 2 {
		t.Fatalf("attestations: %d files, %v refused, %v", len(files), refused, err)
	}
	empty := attest.NewTrustStore()
	for _, f := range files {
		v, err := attest.Verify(f.Data, trust, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if v.Cert == nil || v.Cert.ID != res.CertID || v.Lab != res.Lab || v.Node != res.Node || v.Principal() != res.Lab {
			t.Errorf("%s: signed by node %s, lab %q, cert %v; want node %s under certificate %s of lab %s", f.Name, v.Node, v.Lab, v.Cert, res.Node, res.CertID, res.Lab)
		}
		var ve *attest.VerifyError
		if _, err := attest.Verify(f.Data, empty, time.Now()); !errors.As(err, &ve) {
			t.Errorf("%s verifies without the lab in the trust store: %v", f.Name, err)
		}
	}

	// A second demo in the same home keeps the lab and the certificate, and its ledger
	// covers both demos' attestations.
	res2, err := demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 1,
		Agents: []string{"solver"}, Tasks: []string{"arithmetic"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Lab != res.Lab || res2.CertID != res.CertID {
		t.Errorf("second demo: lab %s cert %s, want the first's %s %s", res2.Lab, res2.CertID, res.Lab, res.CertID)
	}
	if res2.Verified != 3 || res2.Report.Counted != 3 {
		t.Errorf("second demo: %d verified, %d counted; want the 3 runs of both demos", res2.Verified, res2.Report.Counted)
	}
}

// TestDemoRefusesForeignCert: a home whose node is certified by another lab is not the
// demo's to re-certify.
func TestDemoRefusesForeignCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	h, err := home.Resolve(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	key, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := peer.IDFromPrivateKey(key)
	other, err := attest.InitLab(filepath.Join(t.TempDir(), "lab"), "other")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := other.Certify(pid.String(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.CertPath(), cert.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 1, SelfExe: os.Args[0]})
	if err == nil || !strings.Contains(err.Error(), "did not create") {
		t.Fatalf("demo on a home certified by %s: %v", other.ID, err)
	}
	if b, _ := os.ReadFile(h.CertPath()); string(b) != string(cert.Raw()) {
		t.Error("the other lab's certificate was overwritten")
	}
	// Once the home looks like a demo's (its lab folder exists), the foreign certificate is
	// still not replaced.
	os.MkdirAll(filepath.Join(dir, demo.LabDir), 0o700)
	_, err = demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 1, SelfExe: os.Args[0]})
	if err == nil {
		t.Fatal("demo re-certified a node certified by another lab")
	}
	if b, _ := os.ReadFile(h.CertPath()); string(b) != string(cert.Raw()) {
		t.Error("the other lab's certificate was overwritten")
	}
}

// A node home the demo did not create (a lab's real home) is left untouched: no demo lab,
// no certificate, no runs.
func TestDemoRefusesExistingNodeHome(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	h, _ := home.Resolve(dir)
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	_, err := demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 1, SelfExe: os.Args[0]})
	if err == nil || !strings.Contains(err.Error(), "did not create") {
		t.Fatalf("demo on an existing node home: %v", err)
	}
	for _, p := range []string{h.CertPath(), filepath.Join(dir, demo.LabDir), h.AttestationsDir(), h.RunsDir()} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("demo wrote %s into a home it did not create", p)
		}
	}
}
