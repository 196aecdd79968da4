package vstore

import (
	"fmt"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/scoring"
)

// runsAndRescores signs n runs by lab a (seeds 0..n-1), each re-scored by lab b.
func runsAndRescores(t testing.TB, a, b *attestgen.Fixture, n int) [][]byte {
	t.Helper()
	out := make([][]byte, 0, 2*n)
	for i := range n {
		run, err := a.Run(i)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := b.Rescore(attest.EnvelopeID(run), i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, run, rs)
	}
	return out
}

func twoLabs(t testing.TB) (a, b *attestgen.Fixture, trust *attest.TrustStore) {
	t.Helper()
	var err error
	if a, err = attestgen.New("acme"); err != nil {
		t.Fatal(err)
	}
	if b, err = attestgen.New("bolt"); err != nil {
		t.Fatal(err)
	}
	if trust, err = attestgen.Trust(a, b); err != nil {
		t.Fatal(err)
	}
	return a, b, trust
}

func valuesLedgerInput(trust *attest.TrustStore) attest.LedgerInput {
	return attest.LedgerInput{Trust: trust, Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.9}},
		Policy: attest.AcceptPolicy{Replication: 1}, Scoring: scoring.Options{BootstrapRounds: 10}}
}

// ledgerSummary is what must not differ between the ledger paths: the root and the report's
// counts.
func ledgerSummary(l *scoring.Ledger, rep *attest.LedgerReport, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("root %s read %d counted %d rescores %d refused %d", l.Root(), rep.Read, rep.Counted, rep.Rescores, len(rep.Refused))
}

// The ledger the store recomputes from the values it holds is the ledger of its bytes,
// verified afresh (BuildLedger) or restored (LedgerFromStored): the same root and report,
// whether the values were made on arrival or restored after a reopen, and a revocation
// recorded after they were made refuses them as it refuses the bytes.
func TestStoreLedgerFromValuesIsTheLedgerOfItsBytes(t *testing.T) {
	a, b, trust := twoLabs(t)
	envs := runsAndRescores(t, a, b, 40)
	dir := t.TempDir()
	s, err := Open(dir, Options{Trust: trust, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Half before the first ledger (restored into values then), half after (kept on arrival).
	if _, err := s.Attestations().Add(envs[:40], SourceImport, "test"); err != nil {
		t.Fatal(err)
	}
	in := valuesLedgerInput(trust)
	if _, _, err := s.Ledger(in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attestations().Add(envs[40:], SourceGossip, "peer"); err != nil {
		t.Fatal(err)
	}
	files := make([]attest.EnvelopeFile, len(envs))
	for i, e := range envs {
		files[i] = attest.EnvelopeFile{Name: "f", Data: e}
	}
	fresh := in
	fresh.Envelopes = files
	want := ledgerSummary(attest.BuildLedger(fresh))
	if got := ledgerSummary(s.Ledger(in)); got != want {
		t.Fatalf("from values: %s\nverified afresh: %s", got, want)
	}
	if got := ledgerSummary(LedgerFromStored(envs, in)); got != want {
		t.Fatalf("restored: %s\nverified afresh: %s", got, want)
	}
	vs, _, err := s.Values(trust)
	if err != nil || len(vs) != len(envs) {
		t.Fatalf("%d values for %d envelopes (%v)", len(vs), len(envs), err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{Trust: trust, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := ledgerSummary(s.Ledger(in)); got != want {
		t.Fatalf("reopened, from values: %s\nverified afresh: %s", got, want)
	}

	// Lab b revokes its node: its re-scores no longer count, on every path.
	rev, err := b.Lab.Revoke([]string{b.NodeID}, nil, attestgen.Base, "key lost")
	if err != nil {
		t.Fatal(err)
	}
	if err := trust.AddRevocation(rev); err != nil {
		t.Fatal(err)
	}
	revoked := ledgerSummary(attest.BuildLedger(fresh))
	if revoked == want {
		t.Fatal("the revocation changed nothing: the test checks nothing")
	}
	if got := ledgerSummary(s.Ledger(in)); got != revoked {
		t.Fatalf("after the revocation, from values: %s\nverified afresh: %s", got, revoked)
	}
}

// BenchmarkLedgerRecompute is one ledger recomputation of a daemon's store holding n run
// attestations, each re-scored by another lab (2n envelopes), by three paths:
//
//   - bytes: before values were kept (read every envelope from pebble, attest.Restore each:
//     parse, certificate, trust policy; then attest.LedgerFromVerified);
//   - values: Store.Ledger now (the values in memory, the trust policy re-applied);
//   - verify: attest.BuildLedger over the bytes (the CLI's path: every signature checked).
//
// Scoring runs 10 bootstrap rounds, as the tests do, so the path's own cost shows.
// Measured 2026-12-07 (AMD EPYC, 2 cores shared with seven other builds, -benchtime=5x):
//
//	runs  path    ms/op   allocs/op  MB/op
//	1000  bytes     216     191,154   20.5
//	1000  values     35      13,119    3.3   (6.1x faster, 15x fewer allocs)
//	1000  verify    485     189,173   19.9
//	5000  bytes    1084     955,354  101.6
//	5000  values    301      65,306   15.4   (3.6x faster, 15x fewer allocs)
//	5000  verify   2012     945,394   98.3
func BenchmarkLedgerRecompute(b *testing.B) {
	la, lb, trust := twoLabs(b)
	for _, n := range []int{1000, 5000} {
		envs := runsAndRescores(b, la, lb, n)
		s, err := Open(b.TempDir(), Options{Trust: trust, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Attestations().Add(envs, SourceImport, "bench"); err != nil {
			b.Fatal(err)
		}
		in := valuesLedgerInput(trust)
		files := make([]attest.EnvelopeFile, len(envs))
		for i, e := range envs {
			files[i] = attest.EnvelopeFile{Name: "f", Data: e}
		}
		fresh := in
		fresh.Envelopes = files
		want := ledgerSummary(attest.BuildLedger(fresh))
		paths := []struct {
			name   string
			ledger func() (*scoring.Ledger, *attest.LedgerReport, error)
		}{
			{"bytes", func() (*scoring.Ledger, *attest.LedgerReport, error) { return ledgerFromStoredBytes(s, in) }},
			{"values", func() (*scoring.Ledger, *attest.LedgerReport, error) { return s.Ledger(in) }},
			{"verify", func() (*scoring.Ledger, *attest.LedgerReport, error) { return attest.BuildLedger(fresh) }},
		}
		for _, p := range paths {
			if got := ledgerSummary(p.ledger()); got != want {
				b.Fatalf("%s: %s, want %s", p.name, got, want)
			}
			b.Run(fmt.Sprintf("runs=%d/%s", n, p.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := p.ledger(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		s.Close()
	}
}

// ledgerFromStoredBytes is Store.Ledger as it was before the store kept values: every
// envelope read from pebble and restored, on every recomputation.
func ledgerFromStoredBytes(s *Store, in attest.LedgerInput) (*scoring.Ledger, *attest.LedgerReport, error) {
	var envs [][]byte
	if err := s.Attestations().Each(func(_ recon.ID, env []byte) error {
		envs = append(envs, env)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return LedgerFromStored(envs, in)
}

// The values the ledger recomputes from cover every stored envelope when a batch commits
// under another trust store than the one the values are kept under: each case once made a
// ledger over part of the store (a restarted daemon counted 3 of 18 runs its peers
// counted, TestFaultKillNodeMidCampaign), because the batch's values were dropped on
// arrival while its envelopes were stored.
func TestStoreValuesCoverABatchVerifiedUnderAnotherTrustStore(t *testing.T) {
	a, b, homeTrust := twoLabs(t)
	sameLabs, err := attestgen.Trust(a, b) // the network's trust store: the same labs
	if err != nil {
		t.Fatal(err)
	}
	labAOnly, err := attestgen.Trust(a) // lab b left the network: its re-scores are refused
	if err != nil {
		t.Fatal(err)
	}
	envs := runsAndRescores(t, a, b, 9)
	for _, c := range []struct {
		name string
		// during runs while the batch is verified (under homeTrust) and before it commits.
		during func(s *Store, meshTrust *attest.TrustStore) error
	}{
		// A restart: node.New opens the store under HOME/trust.yaml and a sync session
		// starts verifying what the node missed; the mesh starts meanwhile, switches the
		// store to its own trust store (the network document's) and reads the values.
		{"restart: the mesh starts while a sync batch is verified", func(s *Store, meshTrust *attest.TrustStore) error {
			s.SetTrust(meshTrust)
			_, _, err := s.Values(meshTrust)
			return err
		}},
		// The ledger asked under a trust store other than the store's own.
		{"values asked under another trust store", func(s *Store, meshTrust *attest.TrustStore) error {
			_, _, err := s.Values(meshTrust)
			return err
		}},
	} {
		for _, meshTrust := range []*attest.TrustStore{sameLabs, labAOnly} {
			in := valuesLedgerInput(meshTrust)
			want := ledgerSummary(LedgerFromStored(envs, in))
			t.Run(fmt.Sprintf("%s/%d labs", c.name, len(meshTrust.Labs())), func(t *testing.T) {
				s, err := Open(t.TempDir(), Options{Trust: homeTrust, NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Attestations().Add(envs[:6], SourceLocal, ""); err != nil {
					t.Fatal(err)
				}
				set := s.Attestations()
				inner := set.verify
				set.verify = func(batch [][]byte) []verdict {
					out := inner(batch)
					if err := c.during(s, meshTrust); err != nil {
						t.Error(err)
					}
					return out
				}
				res, err := set.Add(envs[6:], SourceSync, "peer")
				if err != nil || count(res, StatusNew) != len(envs)-6 {
					t.Fatalf("%+v %v", res, err)
				}
				vs, refused, err := s.Values(meshTrust)
				if err != nil || len(vs)+len(refused) != len(envs) {
					t.Fatalf("%d values and %d refused for %d stored envelopes (%v)", len(vs), len(refused), len(envs), err)
				}
				if got := ledgerSummary(s.Ledger(in)); got != want {
					t.Fatalf("from values: %s\nfrom the stored bytes: %s", got, want)
				}
			})
		}
	}
}
