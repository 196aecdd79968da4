package vstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/scoring"
)

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
	f, trust := vstoretest.Lab(t, "acme")
	dir := t.TempDir()
	s, err := Open(dir, Options{Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	envs := vstoretest.SignRuns(t, f, 0, 40)
	verified := countVerify(s.Attestations())
	var forwarded int
	s.Attestations().OnNew(func(_ Source, e []Accepted) { forwarded += len(e) })

	res, err := s.Attestations().Add(envs, SourceImport, "test")
	if err != nil {
		t.Fatal(err)
	}
	if count(res, StatusNew) != 40 || *verified != 40 || forwarded != 40 {
		t.Fatalf("first add: %d new, %d verified, %d forwarded; want 40 each", count(res, StatusNew), *verified, forwarded)
	}
	bad := vstoretest.Mutate(envs[3])
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

	s, err = Open(dir, Options{Trust: trust})
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
	f, trust := vstoretest.Lab(t, "acme")
	dir := t.TempDir()
	old, err := openTweaked(dir, Options{Trust: trust}, func(po *pebble.Options) {
		po.FormatMajorVersion = pebble.FormatDefault
		po.Experimental.ValueSeparationPolicy = nil
	})
	if err != nil {
		t.Fatal(err)
	}
	envs := vstoretest.SignRuns(t, f, 0, 30)
	if _, err := old.Attestations().Add(envs, SourceImport, "test"); err != nil {
		t.Fatal(err)
	}
	fp, n := old.Attestations().Fingerprint(), old.Attestations().Len()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{Trust: trust})
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
	res, err := s.Attestations().Add(append(envs[:3:3], vstoretest.SignRuns(t, f, 30, 35)...), SourceSync, "peer")
	if err != nil || count(res, StatusKnown) != 3 || count(res, StatusNew) != 5 || *verified != 5 {
		t.Fatalf("add after the upgrade: %+v (%v), %d verified; want 3 known, 5 new, 5 verified", res, err, *verified)
	}
}

func TestStoreRetriesTrustRefusalsAfterTrustChanges(t *testing.T) {
	f, trust := vstoretest.Lab(t, "acme")
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs := vstoretest.SignRuns(t, f, 0, 3)
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
	s, err := Open(t.TempDir(), Options{VerifyCampaign: func(env []byte) (uint64, any, error) {
		if string(env) == "bad" {
			return 0, nil, &attest.VerifyError{Reason: attest.ReasonBadSignature}
		}
		return uint64(len(env)), nil, nil
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

// AddVerified stores a campaign with the value its caller verified, without verifying it
// again, when the store admits the value (Options.AdmitCampaign); a value it does not admit,
// or none, is verified as Add verifies, and OnNew hands on the value either way.
func TestStoreAddVerifiedSkipsVerifyingAdmittedValues(t *testing.T) {
	type camp struct{ env string }
	s, err := Open(t.TempDir(), Options{
		VerifyCampaign: func(env []byte) (uint64, any, error) {
			if string(env) == "bad" {
				return 0, nil, &attest.VerifyError{Reason: attest.ReasonBadSignature}
			}
			return 7, &camp{string(env)}, nil
		},
		AdmitCampaign: func(env []byte, value any) (uint64, recon.ID, bool) {
			c, ok := value.(*camp)
			return 9, DigestOf(env), ok && c.env == string(env)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set := s.Campaigns()
	verified := countVerify(set)
	var handed []any
	set.OnNew(func(_ Source, news []Accepted) {
		for _, a := range news {
			handed = append(handed, a.Value)
		}
	})
	gossiped := &camp{"gossiped"}
	res, err := set.AddVerified([]Accepted{
		{Envelope: []byte("gossiped"), Value: gossiped},         // admitted: not verified
		{Envelope: []byte("mismatched"), Value: &camp{"other"}}, // not admitted: verified
		{Envelope: []byte("synced")},                            // no value: verified
		{Envelope: []byte("bad")},
	}, SourceGossip, "p")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != StatusNew || res[1].Status != StatusNew || res[2].Status != StatusNew || res[3].Status != StatusRefused {
		t.Fatalf("%+v", res)
	}
	if *verified != 3 {
		t.Fatalf("%d envelopes verified, want 3 (all but the admitted one)", *verified)
	}
	if len(handed) != 3 || handed[0] != gossiped {
		t.Fatalf("OnNew got %v, want the admitted value first, as given", handed)
	}
	var times []uint64
	set.View(func(st recon.Storage) {
		for i := range st.Len() {
			times = append(times, st.At(i).Time)
		}
	})
	if fmt.Sprint(times) != "[7 7 9]" {
		t.Fatalf("order keys %v, want the verifier's 7 twice and the admitted 9", times)
	}
	// Attestations admit no value: they are verified.
	f, trust := vstoretest.Lab(t, "acme")
	s.SetTrust(trust)
	att := countVerify(s.Attestations())
	env := vstoretest.SignRuns(t, f, 0, 1)[0]
	if res, _ := s.Attestations().AddVerified([]Accepted{{Envelope: env, Value: "anything"}}, SourceGossip, "p"); res[0].Status != StatusNew || *att != 1 {
		t.Fatalf("%+v, %d verified", res, *att)
	}
}

// An admitted value's envelope is stored under the digest the admission names, hashed by
// the store no more than verified: the gossip validator hashed it for the campaign's ID.
// The others are hashed once each, as Add hashes them.
func TestStoreAddVerifiedHashesOnlyWhatItWasNotGivenTheDigestOf(t *testing.T) {
	type camp struct {
		env    string
		digest recon.ID
	}
	s, err := Open(t.TempDir(), Options{
		VerifyCampaign: func(env []byte) (uint64, any, error) { return 7, &camp{env: string(env)}, nil },
		AdmitCampaign: func(env []byte, value any) (uint64, recon.ID, bool) {
			c, ok := value.(*camp)
			return 9, c.digest, ok && c.env == string(env)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hashed := 0
	defer func(f func([]byte) [32]byte) { sum256 = f }(sum256)
	sum256 = func(b []byte) [32]byte { hashed++; return sha256.Sum256(b) }

	gossiped := &camp{env: "gossiped", digest: sha256.Sum256([]byte("gossiped"))}
	res, err := s.Campaigns().AddVerified([]Accepted{
		{Envelope: []byte("gossiped"), Value: gossiped},
		{Envelope: []byte("synced")},
	}, SourceGossip, "p")
	if err != nil {
		t.Fatal(err)
	}
	if hashed != 1 {
		t.Fatalf("%d envelopes hashed, want 1 (the one that came without a digest)", hashed)
	}
	if res[0].Status != StatusNew || res[0].ID != attest.EnvelopeID([]byte("gossiped")) || res[1].Status != StatusNew {
		t.Fatalf("%+v", res)
	}
	if ok, err := s.Campaigns().Has(gossiped.digest); err != nil || !ok {
		t.Fatalf("the admitted envelope is not stored under its digest: %v %v", ok, err)
	}
}

func TestStoreGetManyKeepsRequestOrderSkipsMissingAndStopsAtTheByteCap(t *testing.T) {
	f, trust := vstoretest.Lab(t, "lab-a")
	s, err := Open(t.TempDir(), Options{Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs := vstoretest.SignRuns(t, f, 0, 6)
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
