package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/scoring"
)

// lab is a test lab with a certified node and a trust store for it.
func testLab(t testing.TB, name string) (*attestgen.Fixture, *attest.TrustStore) {
	t.Helper()
	f, err := attestgen.New(name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := attestgen.Trust(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, tr
}

func signRuns(t testing.TB, f *attestgen.Fixture, lo, hi int) [][]byte {
	t.Helper()
	envs, err := f.Runs(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

// mutate flips a byte inside the signed payload (base64 text), so the envelope parses but
// its signature no longer verifies.
func mutate(env []byte) []byte {
	m := append([]byte(nil), env...)
	i := len(m) / 3
	for m[i] == '"' || m[i] == ':' || m[i] == ',' {
		i++
	}
	if m[i] == 'A' {
		m[i] = 'B'
	} else {
		m[i] = 'A'
	}
	return m
}

func count(res []AddResult, s AddStatus) int {
	n := 0
	for _, r := range res {
		if r.Status == s {
			n++
		}
	}
	return n
}

// countVerify wraps a set's verifier to count envelopes verified.
func countVerify(set *Set) *int {
	n := new(int)
	inner := set.verify
	set.verify = func(envs [][]byte) []verdict {
		*n += len(envs)
		return inner(envs)
	}
	return n
}

func TestStoreVerifiesOnceKeepsRefusalsApartAndSurvivesReopen(t *testing.T) {
	f, trust := testLab(t, "acme")
	dir := t.TempDir()
	s, err := OpenStore(dir, StoreOptions{Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	envs := signRuns(t, f, 0, 40)
	verified := countVerify(s.Attestations())
	var forwarded int
	s.Attestations().OnNew(func(_ Source, e [][]byte) { forwarded += len(e) })

	res, err := s.Attestations().Add(envs, SourceImport, "test")
	if err != nil {
		t.Fatal(err)
	}
	if count(res, StatusNew) != 40 || *verified != 40 || forwarded != 40 {
		t.Fatalf("first add: %d new, %d verified, %d forwarded; want 40 each", count(res, StatusNew), *verified, forwarded)
	}
	bad := mutate(envs[3])
	res, err = s.Attestations().Add(append(envs[:5:5], bad), SourceGossip, "peerX")
	if err != nil {
		t.Fatal(err)
	}
	if count(res, StatusKnown) != 5 || res[5].Status != StatusRefused || res[5].Reason == "" {
		t.Fatalf("second add: %+v", res)
	}
	if *verified != 41 || forwarded != 40 {
		t.Fatalf("after the second add %d verified (want 41: only the mutated one), %d forwarded (want 40: refused never forwarded)", *verified, forwarded)
	}
	// Refused for its bytes: not verified again.
	if res, _ = s.Attestations().Add([][]byte{bad}, SourceSync, "peerY"); res[0].Status != StatusRefused || *verified != 41 {
		t.Fatalf("re-offered forgery: %+v, %d verified", res[0], *verified)
	}
	fp := s.Attestations().Fingerprint()
	if s.Close() != nil {
		t.Fatal("close")
	}

	s, err = OpenStore(dir, StoreOptions{Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reverified := countVerify(s.Attestations())
	set := s.Attestations()
	if set.Len() != 40 || set.RefusedLen() != 1 || set.Fingerprint() != fp {
		t.Fatalf("reopened: %d accepted, %d refused, fingerprint changed %v", set.Len(), set.RefusedLen(), set.Fingerprint() != fp)
	}
	refs, err := set.Refusals()
	if err != nil || len(refs) != 1 || refs[0].Source != SourceGossip || refs[0].From != "peerX" || refs[0].Reason != string(attest.ReasonBadSignature) {
		t.Fatalf("refusals %+v %v", refs, err)
	}
	if got, ok, _ := set.Get(DigestOf(envs[7])); !ok || string(got) != string(envs[7]) {
		t.Fatal("envelope 7 not returned byte for byte")
	}
	// The ledger from the store: no verification, same root as verifying the files.
	tasks := []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.9}}
	l, rep, err := s.Ledger(attest.LedgerInput{Tasks: tasks, Scoring: scoring.Options{BootstrapRounds: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if *reverified != 0 {
		t.Fatalf("reopen and ledger verified %d envelopes again", *reverified)
	}
	var files []attest.EnvelopeFile
	for _, e := range envs {
		files = append(files, attest.EnvelopeFile{Name: "f", Data: e})
	}
	l2, rep2, err := attest.BuildLedger(attest.LedgerInput{Envelopes: files, Trust: trust, Tasks: tasks, Scoring: scoring.Options{BootstrapRounds: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Root() != l2.Root() || rep.Counted != rep2.Counted || rep.Counted == 0 {
		t.Fatalf("store ledger root %s (%d counted), from files %s (%d counted)", l.Root(), rep.Counted, l2.Root(), rep2.Counted)
	}
}

// A refusal for a reason of the trust store (unknown lab) is retried once the lab is trusted.
// A home whose store an earlier evalmesh wrote (pebble's default format, envelopes in the
// LSM tree) opens under value separation: the format is ratcheted, nothing is lost and
// nothing is verified again.
func TestStoreWrittenBeforeValueSeparationOpensUnchanged(t *testing.T) {
	f, trust := testLab(t, "acme")
	dir := t.TempDir()
	old, err := openStoreTweaked(dir, StoreOptions{Trust: trust}, func(po *pebble.Options) {
		po.FormatMajorVersion = pebble.FormatDefault
		po.Experimental.ValueSeparationPolicy = nil
	})
	if err != nil {
		t.Fatal(err)
	}
	envs := signRuns(t, f, 0, 30)
	if _, err := old.Attestations().Add(envs, SourceImport, "test"); err != nil {
		t.Fatal(err)
	}
	fp, n := old.Attestations().Fingerprint(), old.Attestations().Len()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(dir, StoreOptions{Trust: trust})
	if err != nil {
		t.Fatalf("a store of the earlier format does not open: %v", err)
	}
	defer s.Close()
	if got := s.Attestations().Fingerprint(); got != fp || s.Attestations().Len() != n || n != 30 {
		t.Fatalf("after the upgrade: %d envelopes, fingerprint %x; want %d, %x", s.Attestations().Len(), got, n, fp)
	}
	verified := countVerify(s.Attestations())
	var back int
	if err := s.Attestations().Each(func(_ recon.ID, env []byte) error {
		if !bytes.Contains(bytes.Join(envs, nil), env) {
			return fmt.Errorf("envelope %d read back differs from every one stored", back)
		}
		back++
		return nil
	}); err != nil || back != 30 {
		t.Fatalf("read back %d envelopes (%v), want the 30 stored", back, err)
	}
	res, err := s.Attestations().Add(append(envs[:3:3], signRuns(t, f, 30, 35)...), SourceSync, "peer")
	if err != nil || count(res, StatusKnown) != 3 || count(res, StatusNew) != 5 || *verified != 5 {
		t.Fatalf("add after the upgrade: %+v (%v), %d verified; want 3 known, 5 new, 5 verified", res, err, *verified)
	}
}

func TestStoreRetriesTrustRefusalsAfterTrustChanges(t *testing.T) {
	f, trust := testLab(t, "acme")
	s, err := OpenStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs := signRuns(t, f, 0, 3)
	res, _ := s.Attestations().Add(envs, SourceGossip, "p")
	if count(res, StatusRefused) != 3 || res[0].Reason != string(attest.ReasonUnknownLab) {
		t.Fatalf("untrusted lab: %+v", res)
	}
	s.SetTrust(trust)
	res, _ = s.Attestations().Add(envs, SourceGossip, "p")
	if count(res, StatusNew) != 3 || s.Attestations().RefusedLen() != 0 {
		t.Fatalf("after trusting the lab: %+v", res)
	}
	if refs, _ := s.Attestations().Refusals(); len(refs) != 0 {
		t.Fatalf("accepted envelopes still listed as refused: %+v", refs)
	}
}

func TestStoreCampaignsUseTheGivenVerifier(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{VerifyCampaign: func(env []byte) (uint64, error) {
		if string(env) == "bad" {
			return 0, &attest.VerifyError{Reason: attest.ReasonBadSignature}
		}
		return uint64(len(env)), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, _ := s.Campaigns().Add([][]byte{[]byte("good campaign"), []byte("bad")}, SourceGossip, "p")
	if res[0].Status != StatusNew || res[1].Status != StatusRefused || s.Campaigns().Len() != 1 || s.Attestations().Len() != 0 {
		t.Fatalf("%+v", res)
	}
}

// Runs the node's own runner wrote while the daemon was down enter the store at start.
func TestNodeImportsLocalRunsAtStart(t *testing.T) {
	f, trust := testLab(t, "acme")
	h := newHome(t)
	if err := os.MkdirAll(h.AttestationsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, e := range signRuns(t, f, 0, 3) {
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

func TestStoreGetManyKeepsRequestOrderSkipsMissingAndStopsAtTheByteCap(t *testing.T) {
	f, trust := testLab(t, "lab-a")
	s, err := OpenStore(t.TempDir(), StoreOptions{Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs := signRuns(t, f, 0, 6)
	set := s.Attestations()
	res, err := set.Add(envs[:5], SourceLocal, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := count(res, StatusNew); c != 5 {
		t.Fatalf("%d of 5 new", c)
	}
	// A second Add of stored and new envelopes (the batched "already stored?" sweep).
	res, err = set.Add([][]byte{envs[3], envs[5], envs[0]}, SourceLocal, "")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != StatusKnown || res[1].Status != StatusNew || res[2].Status != StatusKnown {
		t.Fatalf("second add: %+v", res)
	}
	missing := DigestOf([]byte("not stored"))
	ids := []recon.ID{DigestOf(envs[4]), missing, DigestOf(envs[1]), DigestOf(envs[2])}
	got, n, err := set.GetMany(ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || len(got) != 3 || !bytes.Equal(got[0], envs[4]) || !bytes.Equal(got[1], envs[1]) || !bytes.Equal(got[2], envs[2]) {
		t.Fatalf("GetMany: n=%d, %d envelopes", n, len(got))
	}
	// A cap of one byte: the first envelope passes it, so GetMany stops after one.
	got, n, err = set.GetMany(ids, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(got) != 1 || !bytes.Equal(got[0], envs[4]) {
		t.Fatalf("GetMany with a 1-byte cap: n=%d, %d envelopes", n, len(got))
	}
}
