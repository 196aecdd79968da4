package node

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

func ledgerInput() (attest.LedgerInput, error) {
	return attest.LedgerInput{Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.9}}, Scoring: scoring.Options{BootstrapRounds: 10}}, nil
}

func TestImportAndExportOverTheAPI(t *testing.T) {
	l := newSyncLabs(t)
	n := startNode(t, l.options(syncer.Options{}))
	dir := t.TempDir()
	envs := vstoretest.SignRuns(t, l.a, 0, 5)
	for i, e := range envs {
		os.WriteFile(filepath.Join(dir, "run"+string(rune('0'+i))+".json"), e, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "forged.json"), vstoretest.Mutate(envs[0]), 0o644)
	single := filepath.Join(t.TempDir(), "extra.json")
	os.WriteFile(single, vstoretest.SignRuns(t, l.b, 0, 1)[0], 0o644)

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
	got, err := c.StoredEnvelopes(ctx, vstore.SetAttestations)
	if err != nil || len(got) != 6 {
		t.Fatalf("export: %d envelopes, %v", len(got), err)
	}
	in, _ := ledgerInput()
	in.Trust = l.trust
	fromAPI, _, err := vstore.LedgerFromStored(got, in)
	if err != nil {
		t.Fatal(err)
	}
	var files []attest.EnvelopeFile
	for _, e := range append(envs, vstoretest.SignRuns(t, l.b, 0, 1)...) {
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
		raw, err := a.heads.Signed("lab:a")
		if err != nil {
			t.Fatal(err)
		}
		if v := b.heads.Observe(raw, a.ID(), t0); v.Verdict != protocol.Accept {
			t.Fatalf("head %d: %+v", i, v)
		}
	}
	a.Close()
	a2 := startNodeAt(t, ha, testOptions())
	raw, err := a2.heads.Signed("lab:a")
	if err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute)
	b.heads.Observe(raw, a2.ID(), t1)
	st := b.LedgerStatus()
	if len(st.Peers) != 1 || !st.Peers[0].LastHeard.Equal(t1) {
		t.Fatalf("after a's restart b holds %+v; want the head heard at %v", st.Peers, t1)
	}

	b.heads.SetClock(func() time.Time { return t1.Add(16 * time.Second) }, 5*time.Second)
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

// /metrics exports the largest clock offset of a fresh peer head against ours, signed: the
// head's time (a's clock) minus when b heard it (b's clock).
func TestClockOffsetMetricFollowsPeerHeads(t *testing.T) {
	a, b := startNode(t, testOptions()), startNode(t, testOptions())
	heardAt := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a.heads.SetClock(func() time.Time { return heardAt.Add(-7500 * time.Millisecond) }, 5*time.Second)
	b.heads.SetClock(func() time.Time { return heardAt }, 5*time.Second)
	raw, err := a.heads.Signed("lab:a")
	if err != nil {
		t.Fatal(err)
	}
	if v := b.heads.Observe(raw, a.ID(), heardAt); v.Verdict != protocol.Accept {
		t.Fatalf("a's head: %+v", v)
	}
	want := `
# HELP evalmesh_clock_offset_seconds The largest clock offset of a peer against ours (its clock minus ours, signed), measured on fresh heads that carry the sender's time; includes the heads' one-way delay (good to about a second). Absent when no such head was heard.
# TYPE evalmesh_clock_offset_seconds gauge
evalmesh_clock_offset_seconds -7.5
`
	if err := promtest.GatherAndCompare(b.Metrics(), strings.NewReader(want), "evalmesh_clock_offset_seconds"); err != nil {
		t.Fatal(err)
	}
}
