package attest

import (
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// signRunUnder re-certifies f's node for [from, to) and signs run seed claiming the one
// instant end (start = end) under that certificate.
func (f *fixture) signRunUnder(t *testing.T, from, to, end time.Time, seed int) []byte {
	t.Helper()
	return f.signRunSpan(t, from, to, end, end, seed)
}

// signRunSpan is signRunUnder for a run claiming [start, end].
func (f *fixture) signRunSpan(t *testing.T, from, to, start, end time.Time, seed int) []byte {
	t.Helper()
	cert, err := f.lab.Certify(f.nodeID, from, to.Sub(from))
	if err != nil {
		t.Fatal(err)
	}
	f.cert = cert
	p := runPredicate(f.nodeID, f.lab.ID, seed, 0.5)
	p.Start, p.End = start, end
	st, err := NewStatement(runSubjects("sub"+end.String()), PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Sign(f.node, cert, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

var atClaim = VerifyOptions{AtClaimedTime: true}

func TestLedgerCountsRunsOfExpiredCertificates(t *testing.T) {
	f := newFixture(t)
	// Valid for one hour; the run claims to end inside it; "now" is long after.
	env := f.signRunUnder(t, t0, t0.Add(time.Hour), t0.Add(30*time.Minute), 0)
	if _, err := Verify(env, f.trust, t0.Add(2*time.Hour)); ReasonOf(err) != ReasonCertExpired {
		t.Fatalf("at now the certificate must be expired (the case under test), got %v", err)
	}
	tasks := []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.95}}
	var roots []string
	for _, now := range []time.Time{t0.Add(2 * time.Hour), t0.Add(3 * 365 * 24 * time.Hour), {}} {
		l, rep, err := BuildLedger(LedgerInput{Trust: f.trust, Now: now, Tasks: tasks,
			Envelopes: []EnvelopeFile{{Name: "run.json", Data: env}}, Scoring: scoring.Options{BootstrapRounds: 5}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Counted != 1 || len(rep.Refused) != 0 {
			t.Fatalf("now %s: report %+v, want the run counted", now, rep)
		}
		roots = append(roots, l.Root())
	}
	for _, r := range roots[1:] {
		if r != roots[0] {
			t.Fatalf("ledger roots differ with the clock: %v", roots)
		}
	}
}

func TestClaimedTimeOutsideWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  time.Time
		want Reason
	}{
		{"inside", t0.Add(59 * time.Minute), ""},
		{"at not_before", t0, ""},
		{"before not_before", t0.Add(-time.Second), ReasonCertNotYetValid},
		{"at not_after", t0.Add(time.Hour), ReasonCertExpired},
		{"after not_after", t0.Add(48 * time.Hour), ReasonCertExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			env := f.signRunUnder(t, t0, t0.Add(time.Hour), tc.end, 0)
			_, err := VerifyWith(env, f.trust, atClaim)
			if ReasonOf(err) != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("VerifyWith at claimed time: %v, want %q", err, tc.want)
			}
			_, errs := VerifyBatchWith([][]byte{env}, f.trust, atClaim)
			if ReasonOf(errs[0]) != tc.want || (tc.want == "") != (errs[0] == nil) {
				t.Fatalf("VerifyBatchWith at claimed time: %v, want %q", errs[0], tc.want)
			}
			_, rep, err := BuildLedger(LedgerInput{Trust: f.trust, Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.95}},
				Envelopes: []EnvelopeFile{{Name: "run.json", Data: env}}, Scoring: scoring.Options{BootstrapRounds: 5}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if rep.Counted != 1 {
					t.Fatalf("report %+v, want the run counted", rep)
				}
			} else if len(rep.Refused) != 1 || rep.Refused[0].Reason != string(tc.want) {
				t.Fatalf("report %+v, want the run refused as %q", rep, tc.want)
			}
		})
	}
}

// Both ends of a run must lie in its certificate's window: a node cannot date a run's start
// into an expired certificate's window, nor its end into a future one.
func TestClaimedRunSpanInsideCertificate(t *testing.T) {
	from, to := t0, t0.Add(time.Hour)
	for _, tc := range []struct {
		name       string
		start, end time.Time
		want       Reason
		detail     string
	}{
		{"inside", t0.Add(time.Minute), t0.Add(59 * time.Minute), "", ""},
		{"the whole window", t0, t0.Add(time.Hour - time.Second), "", ""},
		{"starts before not_before", t0.Add(-time.Minute), t0.Add(30 * time.Minute), ReasonCertNotYetValid, "claimed start"},
		{"ends at not_after", t0.Add(30 * time.Minute), t0.Add(time.Hour), ReasonCertExpired, "claimed end"},
		{"spans the window", t0.Add(-time.Hour), t0.Add(2 * time.Hour), ReasonCertNotYetValid, "claimed start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			env := f.signRunSpan(t, from, to, tc.start, tc.end, 0)
			_, err := VerifyWith(env, f.trust, atClaim)
			if ReasonOf(err) != tc.want || (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.detail)) {
				t.Fatalf("VerifyWith at claimed time: %v, want %q saying %q", err, tc.want, tc.detail)
			}
			_, errs := VerifyBatchWith([][]byte{env}, f.trust, atClaim)
			if ReasonOf(errs[0]) != tc.want {
				t.Fatalf("VerifyBatchWith: %v, want %q", errs[0], tc.want)
			}
		})
	}
}

func TestRevocationRefusesBackdatedClaims(t *testing.T) {
	for _, byCert := range []bool{false, true} {
		f := newFixture(t)
		env := f.signRunUnder(t, t0, t0.Add(time.Hour), t0.Add(10*time.Minute), 0)
		if _, err := VerifyWith(env, f.trust, atClaim); err != nil {
			t.Fatal(err)
		}
		nodes, certs := []string{f.nodeID}, []string(nil)
		if byCert {
			nodes, certs = nil, []string{f.cert.ID}
		}
		// Revoked at t0+30m, after the run's claimed end.
		rev, err := f.lab.Revoke(nodes, certs, t0.Add(30*time.Minute), "key leaked")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.trust.AddRevocation(rev); err != nil {
			t.Fatal(err)
		}
		// At now, before the revocation time, it still verifies (unchanged rule)...
		if _, err := Verify(env, f.trust, t0.Add(20*time.Minute)); err != nil {
			t.Fatalf("by cert %v: at now before the revocation: %v", byCert, err)
		}
		// ...but at its claimed time nothing signed under a revoked certificate counts.
		if _, err := VerifyWith(env, f.trust, atClaim); ReasonOf(err) != ReasonCertRevoked {
			t.Fatalf("by cert %v: claimed before the revocation: %v, want %q", byCert, err, ReasonCertRevoked)
		}
		_, rep, err := BuildLedger(LedgerInput{Trust: f.trust, Envelopes: []EnvelopeFile{{Name: "run.json", Data: env}}, Scoring: scoring.Options{BootstrapRounds: 5}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Refused) != 1 || rep.Refused[0].Reason != string(ReasonCertRevoked) {
			t.Fatalf("by cert %v: ledger report %+v, want the run refused as revoked", byCert, rep)
		}
	}
}

func TestRescoreClaimedTime(t *testing.T) {
	f := newFixture(t) // certificate valid [t0-24h, t0+29d)
	_, runID := f.signRun(t, 0, "sub", 0.5)
	withTime := f.signRescore(t, runID, true, 0.5) // time t0-30m
	if v, err := VerifyWith(withTime, f.trust, atClaim); err != nil || !v.Rescore.Time.Equal(t0.Add(-30*time.Minute)) {
		t.Fatalf("re-score with a time: %v, %v", v, err)
	}
	p := RescorePredicate{Run: runID, Valid: true, Score: ptr(0.5), Metric: "accuracy", Evaluator: "builtin:accuracy", Node: f.nodeID, Lab: f.lab.ID}
	st, err := NewStatement([]Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": sha("x")}}}, PredicateRescoreV1, p)
	if err != nil {
		t.Fatal(err)
	}
	noTime, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(noTime, f.trust, t0); err != nil {
		t.Fatalf("at now a re-score without time verifies as before: %v", err)
	}
	if _, err := VerifyWith(noTime, f.trust, atClaim); ReasonOf(err) != ReasonNoClaimedTime {
		t.Fatalf("at its claimed time: %v, want %q", err, ReasonNoClaimedTime)
	}
	// A re-score claiming a time outside its signer's window is refused like a run.
	p.Time = t0.Add(-48 * time.Hour)
	st, _ = NewStatement([]Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": sha("x")}}}, PredicateRescoreV1, p)
	early, _, _ := Sign(f.node, f.cert, st)
	if _, err := VerifyWith(early, f.trust, atClaim); ReasonOf(err) != ReasonCertNotYetValid {
		t.Fatalf("re-score claimed before its certificate: %v", err)
	}
}

// TestCacheKeepsModesApart: one cache answers both modes; a verdict of one never answers
// the other, in either order, single or batch.
func TestCacheKeepsModesApart(t *testing.T) {
	f := newFixture(t)
	now := t0.Add(2 * time.Hour)
	// expired: cert [t0, t0+1h), claimed t0+30m: good at its claim, expired at now.
	expired := f.signRunUnder(t, t0, t0.Add(time.Hour), t0.Add(30*time.Minute), 0)
	// backdated: cert [t0+90m, t0+3h), claimed t0+30m: good at now, not at its claim.
	backdated := f.signRunUnder(t, t0.Add(90*time.Minute), t0.Add(3*time.Hour), t0.Add(30*time.Minute), 1)
	want := func(env []byte, o VerifyOptions) Reason {
		switch {
		case string(env) == string(expired) && !o.AtClaimedTime:
			return ReasonCertExpired
		case string(env) == string(backdated) && o.AtClaimedTime:
			return ReasonCertNotYetValid
		}
		return ""
	}
	modes := []VerifyOptions{{Now: now}, atClaim}
	for _, first := range []int{0, 1} {
		for _, batch := range []bool{false, true} {
			c, err := NewCache(16)
			if err != nil {
				t.Fatal(err)
			}
			order := []VerifyOptions{modes[first], modes[1-first], modes[first], modes[1-first]}
			for step, o := range order {
				for _, env := range [][]byte{expired, backdated} {
					var err error
					if batch {
						_, errs := c.VerifyBatchWith([][]byte{env, env}, f.trust, o)
						if ReasonOf(errs[0]) != ReasonOf(errs[1]) {
							t.Fatalf("repeat within a batch answered %v and %v", errs[0], errs[1])
						}
						err = errs[0]
					} else {
						_, err = c.VerifyWith(env, f.trust, o)
					}
					if w := want(env, o); ReasonOf(err) != w || (w == "") != (err == nil) {
						t.Fatalf("first mode %d, batch %v, step %d (claimed %v): %v, want %q", first, batch, step, o.AtClaimedTime, err, w)
					}
				}
			}
		}
	}
}
