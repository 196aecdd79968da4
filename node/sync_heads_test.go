package node

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

var headsNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ledgerInput() (attest.LedgerInput, error) {
	return attest.LedgerInput{Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.9}}, Scoring: scoring.Options{BootstrapRounds: 10}}, nil
}

func networkDoc(t *testing.T, name string, replication int) *protocol.NetworkDoc {
	t.Helper()
	pub, _, _ := ed25519.GenerateKey(nil)
	d, err := protocol.ParseNetworkDoc([]byte(`{"version":1,"network":"` + name + `","labs":[{"name":"x","key":"` +
		base64.StdEncoding.EncodeToString(pub) + `"}],"ledger":{"replication":` + string(rune('0'+replication)) + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestImportAndExportOverTheAPI(t *testing.T) {
	l := newSyncLabs(t)
	n := startNode(t, l.options(SyncOptions{}))
	dir := t.TempDir()
	envs := signRuns(t, l.a, 0, 5)
	for i, e := range envs {
		os.WriteFile(filepath.Join(dir, "run"+string(rune('0'+i))+".json"), e, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "forged.json"), mutate(envs[0]), 0o644)
	single := filepath.Join(t.TempDir(), "extra.json")
	os.WriteFile(single, signRuns(t, l.b, 0, 1)[0], 0o644)

	n.apiToken = "test-token" // Run sets it; the handler refuses every request without one
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	c := NewClientAddr(n.home, strings.TrimPrefix(srv.URL, "http://"), n.apiToken)
	ctx := context.Background()
	rep, err := c.ImportAttestations(ctx, []string{dir, single})
	if err != nil {
		t.Fatal(err)
	}
	if rep.New != 6 || rep.Known != 0 || rep.Refused != 1 || rep.Refusals[0].Reason != string(attest.ReasonBadSignature) || !strings.HasSuffix(rep.Refusals[0].File, "forged.json") {
		t.Fatalf("first import: %+v", rep)
	}
	if rep, err = c.ImportAttestations(ctx, []string{dir}); err != nil || rep.New != 0 || rep.Known != 5 || rep.Refused != 1 {
		t.Fatalf("second import: %+v %v", rep, err)
	}
	if _, err := c.ImportAttestations(ctx, []string{"relative/path"}); err == nil {
		t.Fatal("relative path accepted")
	}
	got, err := c.StoredEnvelopes(ctx, SetAttestations)
	if err != nil || len(got) != 6 {
		t.Fatalf("export: %d envelopes, %v", len(got), err)
	}
	in, _ := ledgerInput()
	in.Trust = l.trust
	fromAPI, _, err := LedgerFromStored(got, in)
	if err != nil {
		t.Fatal(err)
	}
	var files []attest.EnvelopeFile
	for _, e := range append(envs, signRuns(t, l.b, 0, 1)...) {
		files = append(files, attest.EnvelopeFile{Name: "f", Data: e})
	}
	in.Envelopes = files
	direct, _, err := attest.BuildLedger(in)
	if err != nil || fromAPI.Root() != direct.Root() {
		t.Fatalf("root from the daemon's store %s, verifying the files %s (%v)", fromAPI.Root(), direct.Root(), err)
	}
	st, err := c.LedgerStatus(ctx)
	if err != nil || st.Attestations != 6 || st.Refused != 1 || st.Peers == nil {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestHeadsAgreementOtherDocumentAndRootMismatch(t *testing.T) {
	l := newSyncLabs(t)
	doc := networkDoc(t, "evalmesh", 0)
	opts := func(d *protocol.NetworkDoc) Options {
		o := l.options(SyncOptions{})
		o.Network, o.LedgerInput = d, ledgerInput
		return o
	}
	a, b := startNode(t, opts(doc)), startNode(t, opts(doc))
	other := startNode(t, opts(networkDoc(t, "evalmesh", 2)))
	// Heads are heard at headsNow (and a minute later): a reads them at that time, fresh.
	a.setHeadsClock(func() time.Time { return headsNow.Add(time.Minute) }, time.Minute)
	addLocal(t, a, signRuns(t, l.a, 0, 20))
	addLocal(t, b, signRuns(t, l.a, 0, 20))
	addLocal(t, other, signRuns(t, l.a, 0, 20))

	hb, err := b.SignedHead("lab-a")
	if err != nil {
		t.Fatal(err)
	}
	if v := a.ObserveHead(hb, b.ID(), headsNow); v.Verdict != protocol.Accept {
		t.Fatalf("b's head: %v", v)
	}
	ho, _ := other.SignedHead("lab-a")
	a.ObserveHead(ho, other.ID(), headsNow)
	if v := a.ObserveHead(hb, other.ID(), headsNow); v.Verdict != protocol.Reject {
		t.Fatalf("b's head relayed as other's: %v", v)
	}
	// A liar with the same set announcing another root.
	key, _ := b.home.Identity()
	ours := a.OurHead()
	forgedRoot := strings.Repeat("0", 64)
	prev, err := protocol.DecodeHead(hb)
	if err != nil {
		t.Fatal(err)
	}
	lie, err := protocol.SignHead(protocol.Head{Version: protocol.Version, Network: ours.Network, NetworkDoc: ours.NetworkDoc,
		PeerID: b.ID().String(), LedgerRoot: forgedRoot, Attestations: ours.Attestations, Fingerprint: ours.Fingerprint, Seq: prev.Seq + 1}, key)
	if err != nil {
		t.Fatal(err)
	}

	st := a.LedgerStatus()
	if st.LedgerRoot == "" || st.NetworkDoc != doc.Hash() || len(st.Peers) != 2 {
		t.Fatalf("status %+v", st)
	}
	for _, p := range st.Peers {
		switch p.PeerID {
		case b.ID().String():
			if !p.Agrees || p.LedgerRoot != st.LedgerRoot || p.Lab != "lab-a" || !p.LastHeard.Equal(headsNow) {
				t.Fatalf("b: %+v", p)
			}
		case other.ID().String():
			if p.Agrees || p.Status != protocol.StatusOtherDocument {
				t.Fatalf("other document reported as %+v", p)
			}
		}
	}
	a.ObserveHead(lie, b.ID(), headsNow.Add(time.Minute))
	for _, p := range a.LedgerStatus().Peers {
		if p.PeerID == b.ID().String() && (p.Agrees || p.Status != protocol.StatusRootMismatch || p.LedgerRoot != forgedRoot) {
			t.Fatalf("lying head reported as %+v", p)
		}
	}
}

// A head showing another set under our document starts a sync with that peer.
func TestHeadThatDiffersStartsASync(t *testing.T) {
	l := newSyncLabs(t)
	doc := networkDoc(t, "evalmesh", 0)
	o := l.options(SyncOptions{})
	o.Network = doc
	a, b := startNode(t, o), startNode(t, o)
	connect(t, a, b)
	inSync(t, 0, a, b)
	testutil.WaitFor(t, 10*time.Second, "the connect session", func() bool { return len(a.Syncer().LastStats(b.ID())) == 2 })
	addLocal(t, b, signRuns(t, l.b, 0, 30)) // no gossip here: only the head tells a
	hb, _ := b.SignedHead("")
	a.ObserveHead(hb, b.ID(), headsNow)
	inSync(t, 30, a, b)
}

// A restarted node's heads are newer than those its peers kept from before the restart
// (they keep the highest seq); a head not heard for 3 intervals is stale, never agreeing.
func TestHeadsStayOrderedAcrossRestart(t *testing.T) {
	ha := newHome(t)
	a, err := New(context.Background(), ha, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := startNode(t, testOptions())
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		raw, err := a.SignedHead("lab:a")
		if err != nil {
			t.Fatal(err)
		}
		if v := b.ObserveHead(raw, a.ID(), t0); v.Verdict != protocol.Accept {
			t.Fatalf("head %d: %+v", i, v)
		}
	}
	a.Close()
	a2 := startNodeAt(t, ha, testOptions())
	raw, err := a2.SignedHead("lab:a")
	if err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute)
	b.ObserveHead(raw, a2.ID(), t1)
	st := b.LedgerStatus()
	if len(st.Peers) != 1 || !st.Peers[0].LastHeard.Equal(t1) {
		t.Fatalf("after a's restart b holds %+v; want the head heard at %v", st.Peers, t1)
	}

	b.setHeadsClock(func() time.Time { return t1.Add(16 * time.Second) }, 5*time.Second)
	st = b.LedgerStatus()
	if p := st.Peers[0]; !p.Stale || p.Agrees || p.Status != protocol.StatusStale || p.AgeSeconds != 16 {
		t.Fatalf("a head 16 s old with a 15 s bound: %+v", p)
	}
	// Connected, the peer is listed with its head's age, and /metrics counts it.
	connect(t, a2, b)
	ps := b.Peers()
	if len(ps) != 1 || ps[0].HeadAgeSeconds == nil || *ps[0].HeadAgeSeconds != 16 || !ps[0].HeadStale {
		t.Fatalf("peers of b: %+v", ps)
	}
	want := `
# HELP evalmesh_head_age_seconds Seconds since the last head heard from the connected peer heard from longest ago (absent when no connected peer has sent one).
# TYPE evalmesh_head_age_seconds gauge
evalmesh_head_age_seconds 16
# HELP evalmesh_peers Peers connected now.
# TYPE evalmesh_peers gauge
evalmesh_peers 1
`
	if err := promtest.GatherAndCompare(b.Metrics(), strings.NewReader(want), "evalmesh_peers", "evalmesh_head_age_seconds"); err != nil {
		t.Fatal(err)
	}
}
