package attest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// acceptWorld is a few labs, each with one certified node, all trusted by one store.
type acceptWorld struct {
	t     testing.TB
	labs  []*fixture
	trust *TrustStore
	envs  map[string][]byte // by test name
	ids   map[string]string // test name → envelope ID
}

func newAcceptWorld(t testing.TB, n int) *acceptWorld {
	w := &acceptWorld{t: t, trust: NewTrustStore(), envs: map[string][]byte{}, ids: map[string]string{}}
	for i := 0; i < n; i++ {
		f := newFixture(t)
		if _, err := w.trust.AddLab(fmt.Sprintf("lab%d", i), f.lab.Pub); err != nil {
			t.Fatal(err)
		}
		w.labs = append(w.labs, f)
	}
	return w
}

func (w *acceptWorld) put(name string, env []byte) {
	w.t.Helper()
	if _, dup := w.envs[name]; dup {
		w.t.Fatalf("test names envelope %q twice", name)
	}
	w.envs[name] = env
	w.ids[name] = EnvelopeID(env)
}

// run signs a run attestation by lab's node. score < 0 makes an invalid run. wall varies the
// statement bytes without changing the submission (a re-signed duplicate).
func (w *acceptWorld) run(name string, lab int, task, agent string, seed int, submission string, score float64, wall float64) {
	w.t.Helper()
	f := w.labs[lab]
	p := runPredicate(f.nodeID, f.lab.ID, seed, score)
	p.Slot.Task, p.Slot.Agent = task, agent
	p.WallSeconds = wall
	if score < 0 {
		p.Valid, p.Score, p.InvalidReason = false, nil, "submission.csv missing"
	}
	w.putRun(name, lab, p, submission)
}

// putRun signs run predicate p by lab's node, with submission's digest as its subject.
func (w *acceptWorld) putRun(name string, lab int, p RunPredicate, submission string) {
	w.t.Helper()
	w.putRunSubjects(name, lab, p, runSubjects(submission))
}

// putRunSubjects signs run predicate p by lab's node with the given subjects.
func (w *acceptWorld) putRunSubjects(name string, lab int, p RunPredicate, subjects []Subject) {
	w.t.Helper()
	f := w.labs[lab]
	st, err := NewStatement(subjects, PredicateRunV1, p)
	if err != nil {
		w.t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

// rescore signs lab's re-score of the run named run. score < 0: re-scored as invalid.
func (w *acceptWorld) rescore(name string, lab int, run string, score float64) {
	w.t.Helper()
	id, ok := w.ids[run]
	if !ok {
		w.t.Fatalf("rescore of unknown run %q", run)
	}
	w.put(name, w.labs[lab].signRescore(w.t, id, score >= 0, score))
}

func (w *acceptWorld) foreign(name string, lab int) {
	w.t.Helper()
	f := w.labs[lab]
	st, err := NewStatement(runSubjects("x"), "https://example.com/provenance/v9", map[string]any{"builder": "someone"})
	if err != nil {
		w.t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

func (w *acceptWorld) verified() []*Verified {
	w.t.Helper()
	names := make([]string, 0, len(w.envs))
	for n := range w.envs {
		names = append(names, n)
	}
	sort.Strings(names)
	var vs []*Verified
	for _, n := range names {
		v, err := Verify(w.envs[n], w.trust, t0)
		if err != nil {
			w.t.Fatalf("%s does not verify: %v", n, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// nameOf turns an envelope ID back into its test name, for readable expectations.
func (w *acceptWorld) nameOf(id string) string {
	for n, x := range w.ids {
		if x == id {
			return n
		}
	}
	return id
}

func TestAccept(t *testing.T) {
	const task, agent = "bafytask", "bafyagent"
	cases := []struct {
		name   string
		policy AcceptPolicy
		build  func(w *acceptWorld)
		// want: one line per result "task agent seed status score name"; excluded: "name: reason".
		want     []string
		excluded []string
	}{{
		name: "one valid and one invalid run count on their own signature",
		build: func(w *acceptWorld) {
			w.run("r0", 0, task, agent, 0, "s0", 0.5, 1)
			w.run("r1", 0, task, agent, 1, "s1", -1, 1)
		},
		want: []string{
			"bafytask bafyagent 0 SUCCESS 0.5 r0",
			"bafytask bafyagent 1 submission.csv missing <nil> r1",
		},
	}, {
		name: "equivocating pair excluded, the lab's other seed still counts",
		build: func(w *acceptWorld) {
			w.run("a", 0, task, agent, 0, "first", 0.5, 1)
			w.run("b", 0, task, agent, 0, "second", 0.9, 1)
			w.run("c", 0, task, agent, 1, "other", 0.7, 1)
		},
		want:     []string{"bafytask bafyagent 1 SUCCESS 0.7 c"},
		excluded: []string{"a: equivocation", "b: equivocation"},
	}, {
		name: "three-way equivocation lists each envelope once",
		build: func(w *acceptWorld) {
			w.run("a", 0, task, agent, 0, "first", 0.5, 1)
			w.run("b", 0, task, agent, 0, "second", 0.9, 1)
			w.run("c", 0, task, agent, 0, "third", 0.1, 1)
		},
		excluded: []string{"a: equivocation", "b: equivocation", "c: equivocation"},
	}, {
		name: "a re-signed duplicate counts once",
		build: func(w *acceptWorld) {
			w.run("a", 0, task, agent, 0, "same", 0.5, 1)
			w.run("b", 0, task, agent, 0, "same", 0.5, 2)
		},
		want:     []string{"bafytask bafyagent 0 SUCCESS 0.5 a|b"},
		excluded: []string{"a|b: duplicate of a counted run"},
	}, {
		name:   "replication 1: another lab's agreeing re-score is needed, the own lab's is not enough",
		policy: AcceptPolicy{Replication: 1},
		build: func(w *acceptWorld) {
			w.run("confirmed", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("x0", 1, "confirmed", 0.5+1e-12) // within Accuracy's tolerance
			w.run("self", 0, task, agent, 1, "s1", 0.6, 1)
			w.rescore("x1", 0, "self", 0.6)
			w.run("alone", 0, task, agent, 2, "s2", 0.7, 1)
		},
		want:     []string{"bafytask bafyagent 0 SUCCESS 0.5 confirmed"},
		excluded: []string{"alone: too few replicators", "self: too few replicators"},
	}, {
		name:   "replication 2 needs two other labs",
		policy: AcceptPolicy{Replication: 2},
		build: func(w *acceptWorld) {
			w.run("two", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("x1", 1, "two", 0.5)
			w.rescore("x2", 2, "two", 0.5)
			w.run("one", 0, task, agent, 1, "s1", 0.5, 1)
			w.rescore("y1", 1, "one", 0.5)
		},
		want:     []string{"bafytask bafyagent 0 SUCCESS 0.5 two"},
		excluded: []string{"one: too few replicators"},
	}, {
		name: "a disagreeing re-score excludes the run even without replication",
		build: func(w *acceptWorld) {
			w.run("disputed", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("x", 1, "disputed", 0.51)
			w.run("invalidated", 0, task, agent, 1, "s1", 0.5, 1)
			w.rescore("y", 1, "invalidated", -1)
			w.run("fine", 0, task, agent, 2, "s2", 0.5, 1)
		},
		want:     []string{"bafytask bafyagent 2 SUCCESS 0.5 fine"},
		excluded: []string{"disputed: disagreeing re-score", "invalidated: disagreeing re-score"},
	}, {
		name:   "the majority of labs decides: two for, one against, the run counts",
		policy: AcceptPolicy{Replication: 1},
		build: func(w *acceptWorld) {
			w.run("r", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("ok", 1, "r", 0.5)
			w.rescore("no", 2, "r", 0.4)
		},
		want: []string{"bafytask bafyagent 0 SUCCESS 0.5 r"},
	}, {
		name:   "the majority of labs decides: one for, two against, the run does not count",
		policy: AcceptPolicy{Replication: 1},
		build: func(w *acceptWorld) {
			w.run("r", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("no1", 1, "r", 0.4)
			w.rescore("no2", 2, "r", 0.3)
		},
		excluded: []string{"r: disagreeing re-score"},
	}, {
		name: "a lab's re-score of its own run is no vote: it cannot withdraw its result",
		build: func(w *acceptWorld) {
			w.run("r", 0, task, agent, 0, "s0", 0.5, 1)
			w.rescore("self", 0, "r", 0.1)
		},
		want: []string{"bafytask bafyagent 0 SUCCESS 0.5 r"},
	}, {
		name: "a foreign predicate type is ignored, neither counted nor excluded",
		build: func(w *acceptWorld) {
			w.foreign("f", 0)
			w.run("r", 0, task, agent, 0, "s0", 0.5, 1)
		},
		want: []string{"bafytask bafyagent 0 SUCCESS 0.5 r"},
	}, {
		name:   "bundles and agents are named through the policy; unknown ones do not count",
		policy: AcceptPolicy{Tasks: map[string]string{"bafytask": "SVAMP"}, Agents: map[string]string{"bafyagent": "greedy"}},
		build: func(w *acceptWorld) {
			w.run("known", 0, task, agent, 0, "s0", 0.5, 1)
			w.run("task?", 0, "bafyother", agent, 0, "s1", 0.5, 1)
			w.run("agent?", 0, task, "bafystranger", 0, "s2", 0.5, 1)
		},
		want:     []string{"SVAMP greedy 0 SUCCESS 0.5 known"},
		excluded: []string{"agent?: unknown agent", "task?: unknown task bundle"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newAcceptWorld(t, 3)
			tc.build(w)
			vs := w.verified()
			o := Reconcile(vs, Agree)
			results, excluded := Accept(o, tc.policy)

			var got []string
			for _, r := range results {
				score := "<nil>"
				if r.Score != nil {
					score = fmt.Sprint(*r.Score)
				}
				got = append(got, fmt.Sprintf("%s %s %d %s %s %s", r.Task, r.Agent, r.Seed, r.Status, score, w.nameOf(r.AttestationID)))
			}
			var gotEx []string
			for _, e := range excluded {
				gotEx = append(gotEx, fmt.Sprintf("%s: %s", w.nameOf(e.ID), e.Reason))
				if e.Principal == "" || e.Slot == (Slot{}) {
					t.Errorf("excluded %s lacks its principal or slot: %+v", w.nameOf(e.ID), e)
				}
			}
			// "a|b" stands for whichever of a and b has the smaller ID; "<min>" for its score.
			resolve := func(lines []string) []string {
				out := slices.Clone(lines)
				for i, l := range out {
					if strings.Contains(l, "a|b") {
						first, second := "a", "b"
						if w.ids["b"] < w.ids["a"] {
							first, second = "b", "a"
						}
						if strings.HasSuffix(l, "a|b") { // the counted one: the smaller ID
							l = strings.Replace(l, "a|b", first, 1)
							v := map[string]string{"a": "0.5", "b": "0.6"}[first]
							l = strings.Replace(l, "<min>", v, 1)
						} else { // the excluded one
							l = strings.Replace(l, "a|b", second, 1)
						}
						out[i] = l
					}
				}
				slices.Sort(out)
				return out
			}
			want, wantEx := resolve(tc.want), resolve(tc.excluded)
			gotSorted := slices.Clone(gotEx)
			slices.Sort(gotSorted)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("results:\n got %q\nwant %q", got, want)
			}
			if !reflect.DeepEqual(gotSorted, wantEx) {
				t.Errorf("excluded:\n got %q\nwant %q", gotSorted, wantEx)
			}
			// Every run attestation is either counted or excluded, never both, never lost.
			runs := 0
			for _, v := range vs {
				if v.Run != nil {
					runs++
				}
			}
			if len(results)+len(excluded) != runs {
				t.Errorf("%d results + %d excluded, want %d run attestations accounted for", len(results), len(excluded), runs)
			}

			// Input order is irrelevant: any permutation gives identical output.
			rng := rand.New(rand.NewPCG(1, uint64(len(vs))))
			for i := 0; i < 5; i++ {
				perm := slices.Clone(vs)
				rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
				r2, e2 := Accept(Reconcile(perm, Agree), tc.policy)
				if !reflect.DeepEqual(r2, results) || !reflect.DeepEqual(e2, excluded) {
					t.Fatalf("permutation %d changed the output:\n%v %v\nvs\n%v %v", i, r2, e2, results, excluded)
				}
			}
		})
	}
}

func TestAcceptResultsFeedTheLedger(t *testing.T) {
	// Accept's output is always acceptable to scoring.ComputeLedger: one result per
	// (task, agent, seed) even when several labs ran one slot.
	w := newAcceptWorld(t, 3)
	for lab := 0; lab < 3; lab++ {
		for seed := 0; seed < 3; seed++ {
			w.run(fmt.Sprintf("l%d-s%d", lab, seed), lab, "bafytask", "bafyagent", seed, fmt.Sprint(lab, seed), 0.1*float64(lab+seed), 1)
		}
	}
	results, excluded := Accept(Reconcile(w.verified(), Agree), AcceptPolicy{Tasks: map[string]string{"bafytask": "T"}})
	if len(results) != 3 || len(excluded) != 6 {
		t.Fatalf("got %d results, %d excluded; want 3 and 6", len(results), len(excluded))
	}
	if _, err := scoring.ComputeLedger(results, []scoring.TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.9}}, scoring.Options{BootstrapRounds: 2}); err != nil {
		t.Fatal(err)
	}
}

func TestAgree(t *testing.T) {
	cases := []struct {
		metric string
		a, b   float64
		want   bool
	}{
		{"Accuracy", 0.5, 0.5, true},
		{"accuracy", 0.5, 0.5 + 1e-10, true},
		{"Accuracy", 0.5, 0.5 + 1e-8, false},
		{"MAE", 3, 3 + 1e-7, true},
		{"MAE", 3, 3 + 1e-5, false},
		{"no-such-metric", 1, 1, true},
		{"no-such-metric", 1, 1 + 1e-15, false},
	}
	for _, c := range cases {
		if got := Agree(c.metric, c.a, c.b); got != c.want {
			t.Errorf("Agree(%s, %v, %v) = %v, want %v", c.metric, c.a, c.b, got, c.want)
		}
	}
}

func TestLedgerFromDir(t *testing.T) {
	w := newAcceptWorld(t, 2)
	w.run("r0", 0, "T", "agentA", 0, "s0", 0.5, 1)
	w.run("r1", 0, "T", "agentA", 1, "s1", 0.7, 1)
	w.run("q0", 1, "T", "agentB", 0, "q0", 0.6, 1)
	w.run("eq1", 1, "T", "agentB", 1, "e1", 0.6, 1)
	w.run("eq2", 1, "T", "agentB", 1, "e2", 0.9, 1)
	w.run("nope", 0, "Unknown", "agentA", 0, "n", 0.5, 1)
	dir := t.TempDir()
	for n, env := range w.envs {
		if err := os.WriteFile(filepath.Join(dir, w.ids[n]+".json"), env, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A tampered copy of r0: one byte of the signature changed.
	bad := []byte(strings.Replace(string(w.envs["r0"]), `"sig":"`, `"sig":"A`, 1))
	if string(bad) == string(w.envs["r0"]) {
		t.Fatal("tampering did not change the envelope")
	}
	if err := os.WriteFile(filepath.Join(dir, "tampered.json"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "huge.json"), make([]byte, MaxEnvelopeSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not envelopes by name: ignored.
	for _, n := range []string{".tmp-x.json-123", "README.md"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tasks := []scoring.TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.95}}
	cache, err := NewCache(64)
	if err != nil {
		t.Fatal(err)
	}
	in := LedgerInput{Trust: w.trust, Cache: cache, Now: t0, Tasks: tasks, Scoring: scoring.Options{BootstrapRounds: 5}}
	l, rep, err := LedgerFromDir(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Read != 8 || rep.Counted != 3 || len(rep.Refused) != 2 || len(rep.Excluded) != 3 || rep.Equivocations != 1 {
		t.Fatalf("report %+v: want 8 read, 3 counted, 2 refused, 3 excluded, 1 equivocation", rep)
	}
	refused := map[string]string{}
	for _, r := range rep.Refused {
		refused[filepath.Base(r.File)] = r.Reason
	}
	if refused["tampered.json"] != string(ReasonBadSignature) && refused["tampered.json"] != string(ReasonMalformedEnvelope) {
		t.Errorf("tampered.json refused for %q, want a bad signature", refused["tampered.json"])
	}
	if refused["huge.json"] != "too large" {
		t.Errorf("huge.json refused for %q, want too large", refused["huge.json"])
	}
	// The root is the one scoring computes on the accepted results directly.
	results := []scoring.Result{
		{Task: "T", Agent: "agentA", Seed: 0, Status: scoring.StatusSuccess, Score: ptr(0.5), AttestationID: w.ids["r0"]},
		{Task: "T", Agent: "agentA", Seed: 1, Status: scoring.StatusSuccess, Score: ptr(0.7), AttestationID: w.ids["r1"]},
		{Task: "T", Agent: "agentB", Seed: 0, Status: scoring.StatusSuccess, Score: ptr(0.6), AttestationID: w.ids["q0"]},
	}
	want, err := scoring.ComputeLedger(results, tasks, in.Scoring)
	if err != nil {
		t.Fatal(err)
	}
	if l.Root() != want.Root() {
		t.Errorf("ledger root %s, want %s", l.Root(), want.Root())
	}
	// Again through the cache: same root, and nothing new verified.
	n := cache.Len()
	l2, _, err := LedgerFromDir(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Root() != l.Root() || cache.Len() != n {
		t.Errorf("second pass: root %s (want %s), cache %d entries (want %d)", l2.Root(), l.Root(), cache.Len(), n)
	}
	if _, _, err := LedgerFromDir(filepath.Join(dir, "missing"), in); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing folder: %v, want an error saying it does not exist", err)
	}
}

// FuzzBuildLedger feeds arbitrary bytes, beside real envelopes, through the ledger path:
// it must never panic, account for every envelope (refused, or verified and then counted,
// excluded or set aside), and give the same root in either order.
func FuzzBuildLedger(f *testing.F) {
	w := newAcceptWorld(f, 2)
	w.run("r0", 0, "T", "a", 0, "s0", 0.5, 1)
	w.run("r1", 1, "T", "b", 0, "s1", 0.7, 1)
	w.rescore("x", 1, "r0", 0.5)
	for _, n := range []string{"r0", "r1", "x"} {
		f.Add(w.envs[n])
	}
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30","signatures":[{"sig":""}]}`))
	f.Add([]byte("{}"))
	f.Add([]byte(""))
	good := []EnvelopeFile{{Name: "r0", Data: w.envs["r0"]}, {Name: "r1", Data: w.envs["r1"]}, {Name: "x", Data: w.envs["x"]}}
	tasks := []scoring.TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.9}}
	f.Fuzz(func(t *testing.T, data []byte) {
		files := append(slices.Clone(good), EnvelopeFile{Name: "fuzz", Data: data})
		in := LedgerInput{Envelopes: files, Trust: w.trust, Now: t0, Tasks: tasks, Policy: AcceptPolicy{Replication: 1},
			Scoring: scoring.Options{BootstrapRounds: 2}}
		l, rep, err := BuildLedger(in)
		if err != nil {
			t.Fatalf("ledger refused: %v", err)
		}
		if rep.Read != 4 || len(rep.Refused) > 1 {
			t.Fatalf("report %+v for 4 envelopes", rep)
		}
		slices.Reverse(in.Envelopes)
		l2, _, err := BuildLedger(in)
		if err != nil || l2.Root() != l.Root() {
			t.Fatalf("reversed input: root %v, %v; want %s", l2, err, l.Root())
		}
	})
}

// TestAcceptFillOrder: when two labs' runs fill one (task, agent, seed), nothing the
// runner can re-sign and nothing other labs choose to re-score decides which counts. A
// lab that re-signs its run with one field varied (a new attestation ID each time) gets
// the same verdict every time; extra re-scores of the loser do not make it win.
func TestAcceptFillOrder(t *testing.T) {
	const task, agent = "bafytask", "bafyagent"
	w := newAcceptWorld(t, 3)
	w.run("honest", 0, task, agent, 0, "s0", 0.5, 1)
	for variant := 1; variant <= 12; variant++ {
		g := fmt.Sprint("grinder", variant)
		w.run(g, 1, task, agent, 0, "s1", 0.9, float64(variant)) // WallSeconds varied: another ID
		w.rescore("x"+g, 2, g, 0.9)                              // a replicator more than the other
	}
	w.rescore("xhonest", 2, "honest", 0.5)
	all := w.verified()
	winners := map[string]int{}
	for variant := 1; variant <= 24; variant++ {
		g := fmt.Sprint("grinder", (variant+1)/2)
		rescored := "x" + g // odd variants: the grinder has the replicator; even: the honest run
		if variant%2 == 0 {
			rescored = "xhonest"
		}
		var vs []*Verified
		for _, v := range all {
			if n := w.nameOf(v.ID); n == "honest" || n == g || n == rescored {
				vs = append(vs, v)
			}
		}
		results, excluded := Accept(Reconcile(vs, Agree), AcceptPolicy{})
		if len(results) != 1 || len(excluded) != 1 || excluded[0].Reason != ExcludeSuperseded {
			t.Fatalf("variant %d: %d results, excluded %+v; want one counted, one superseded", variant, len(results), excluded)
		}
		winner := w.nameOf(results[0].AttestationID)
		if winner != "honest" {
			winner = "grinder"
		}
		winners[winner]++
	}
	if len(winners) != 1 {
		t.Fatalf("the counted run changed with the grinder's attestation ID or with who was re-scored: %v", winners)
	}
}

// TestAcceptEarliestCampaignFills: with campaign windows, the run of the earlier campaign
// fills the cell, whatever either run's score, ID or attempt.
func TestAcceptEarliestCampaignFills(t *testing.T) {
	w := newAcceptWorld(t, 2)
	late := runPredicate(w.labs[0].nodeID, w.labs[0].lab.ID, 0, 0.9)
	late.Slot.Campaign = "bafylate"
	w.putRun("late", 0, late, "s-late")
	early := runPredicate(w.labs[1].nodeID, w.labs[1].lab.ID, 0, 0.1)
	early.Slot.Campaign = "bafyearly"
	early.Attempt = 2
	w.putRun("early", 1, early, "s-early")
	win := func(created time.Time) CampaignWindow { return CampaignWindow{Created: created, Deadline: t0} }
	p := AcceptPolicy{Campaigns: map[string]CampaignWindow{
		"bafyearly": win(t0.Add(-3 * time.Hour)), "bafylate": win(t0.Add(-150 * time.Minute)),
	}}
	results, excluded := Accept(Reconcile(w.verified(), Agree), p)
	if len(results) != 1 || w.nameOf(results[0].AttestationID) != "early" {
		t.Fatalf("results %+v excluded %+v: want the earlier campaign's run", results, excluded)
	}
}

// TestAcceptEquivocationWithdrawsNothing: a lab that equivocates on a slot cannot fill
// that (task, agent, seed) again from another campaign of its own; with the consequence on,
// one node equivocating sets aside all of its lab's runs, and a pardon lifts it.
func TestAcceptEquivocationWithdrawsNothing(t *testing.T) {
	w := newAcceptWorld(t, 2)
	w.run("bad1", 0, "bafytask", "bafyagent", 0, "low", 0.1, 1)
	w.run("bad2", 0, "bafytask", "bafyagent", 0, "other", 0.2, 1)
	refill := runPredicate(w.labs[0].nodeID, w.labs[0].lab.ID, 0, 0.99)
	refill.Slot.Campaign = "bafyprivate"
	w.putRun("refill", 0, refill, "best")
	w.run("other-seed", 0, "bafytask", "bafyagent", 1, "fine", 0.5, 1)
	w.run("honest", 1, "bafytask", "bafyagent", 2, "h", 0.4, 1)
	o := Reconcile(w.verified(), Agree)

	reasons := func(p AcceptPolicy) map[string]ExcludeReason {
		_, ex := Accept(o, p)
		m := map[string]ExcludeReason{}
		for _, e := range ex {
			m[w.nameOf(e.ID)] = e.Reason
		}
		return m
	}
	got := reasons(AcceptPolicy{})
	if got["refill"] != ExcludeWithdrawn {
		t.Errorf("refill from another campaign: %q, want %q", got["refill"], ExcludeWithdrawn)
	}
	if _, ok := got["other-seed"]; ok {
		t.Errorf("without the consequence the lab's other seed counts; it was excluded: %q", got["other-seed"])
	}
	mis := ProvenMisconduct(o)
	if len(mis) != 1 || mis[0].Kind != MisconductNodeEquivocation || mis[0].Principal != w.labs[0].lab.ID {
		t.Fatalf("misconduct %+v: want one node equivocation by lab 0", mis)
	}
	got = reasons(AcceptPolicy{SetAsideOffenders: true})
	if got["other-seed"] != ExcludeOffender || got["refill"] != ExcludeOffender {
		t.Errorf("with the consequence: other-seed %q, refill %q; want both %q", got["other-seed"], got["refill"], ExcludeOffender)
	}
	if _, ok := got["honest"]; ok {
		t.Errorf("the honest lab's run was excluded: %q", got["honest"])
	}
	got = reasons(AcceptPolicy{SetAsideOffenders: true, Pardoned: map[string]bool{mis[0].Evidence: true}})
	if _, ok := got["other-seed"]; ok {
		t.Errorf("pardoned: other-seed still excluded (%q)", got["other-seed"])
	}
}

// TestAcceptOverruledRescoreIsMisconduct: a lab whose re-score the majority contradicts is
// an offender; with the consequence on, its own runs stop counting.
func TestAcceptOverruledRescoreIsMisconduct(t *testing.T) {
	w := newAcceptWorld(t, 3)
	w.run("r", 0, "bafytask", "bafyagent", 0, "s0", 0.5, 1)
	w.rescore("ok", 1, "r", 0.5)
	w.rescore("veto", 2, "r", 0.0)
	w.run("liar-run", 2, "bafytask", "bafyagent", 1, "s1", 0.7, 1)
	o := Reconcile(w.verified(), Agree)
	tally := o.Tally(w.ids["r"])
	if tally.For != 2 || tally.Against != 1 {
		t.Fatalf("tally %+v, want 2 for, 1 against", tally)
	}
	mis := ProvenMisconduct(o)
	if len(mis) != 1 || mis[0].Evidence != w.ids["veto"] || mis[0].Kind != MisconductOverruled {
		t.Fatalf("misconduct %+v: want the overruled veto", mis)
	}
	results, excluded := Accept(o, AcceptPolicy{Replication: 1, SetAsideOffenders: true})
	if len(results) != 1 || w.nameOf(results[0].AttestationID) != "r" {
		t.Errorf("results %+v: want r alone", results)
	}
	if len(excluded) != 1 || w.nameOf(excluded[0].ID) != "liar-run" || excluded[0].Reason != ExcludeOffender {
		t.Errorf("excluded %+v: want liar-run set aside as an offender's", excluded)
	}
}

func TestUniqueNames(t *testing.T) {
	got := UniqueNames(
		map[string]string{"bafyA": "solver", "bafyB": "solver", "bafyC": "greedy", "bafyD11111111": "solver", "bafyE22222222": "solver"},
		map[string]string{"bafyA": "lab1", "bafyB": "lab2", "bafyD11111111": "lab3", "bafyE22222222": "lab3"})
	want := map[string]string{"bafyA": "solver@lab1", "bafyB": "solver@lab2", "bafyC": "greedy",
		"bafyD11111111": "solver@lab3#11111111", "bafyE22222222": "solver@lab3#22222222"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UniqueNames = %v, want %v", got, want)
	}
}

// TestAcceptHedgingIsMisconduct: a lab that confirmed a run and then contradicts it (to pull
// its confirmation back) has signed one false re-score: it gets no vote and is an offender.
func TestAcceptHedgingIsMisconduct(t *testing.T) {
	w := newAcceptWorld(t, 3)
	w.run("r", 0, "bafytask", "bafyagent", 0, "s0", 0.5, 1)
	w.rescore("yes", 1, "r", 0.5)
	w.rescore("no", 1, "r", 0.1)
	o := Reconcile(w.verified(), Agree)
	if tally := o.Tally(w.ids["r"]); tally.For != 1 || tally.Against != 0 {
		t.Fatalf("tally %+v: a hedging lab must have no vote", tally)
	}
	mis := ProvenMisconduct(o)
	if len(mis) != 1 || mis[0].Kind != MisconductHedged || mis[0].Evidence != w.ids["no"] {
		t.Fatalf("misconduct %+v: want the hedge", mis)
	}
}

// TestAcceptRequiresAWitness: in a network that requires witnesses, a run counts only if it
// cites a witness record of its campaign by a lab other than the campaign's own.
func TestAcceptRequiresAWitness(t *testing.T) {
	w := newAcceptWorld(t, 3)
	campaign, other := EnvelopeID([]byte("campaign")), EnvelopeID([]byte("other campaign"))
	witness := func(name string, lab int, c string) {
		env, _, err := NewWitness(w.labs[lab].node, w.labs[lab].cert, c, t0.Add(-3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		w.put(name, env)
	}
	witness("w-other-lab", 1, campaign)
	witness("w-own-lab", 0, campaign)
	witness("w-wrong-campaign", 1, other)
	run := func(name, cites string, seed int) {
		p := runPredicate(w.labs[0].nodeID, w.labs[0].lab.ID, seed, 0.5)
		p.Slot.Campaign = campaign
		if cites != "" {
			p.Witness = w.ids[cites]
		}
		w.putRun(name, 0, p, name)
	}
	run("witnessed", "w-other-lab", 0)
	run("own-witness", "w-own-lab", 1)
	run("wrong-campaign", "w-wrong-campaign", 2)
	run("none", "", 3)
	p := AcceptPolicy{RequireWitness: true, Campaigns: map[string]CampaignWindow{
		campaign: {Created: t0.Add(-4 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID},
	}}
	results, excluded := Accept(Reconcile(w.verified(), Agree), p)
	if len(results) != 1 || w.nameOf(results[0].AttestationID) != "witnessed" {
		t.Errorf("results %+v: want the witnessed run alone", results)
	}
	for _, e := range excluded {
		if e.Reason != ExcludeUnwitnessed {
			t.Errorf("%s: %q, want %q", w.nameOf(e.ID), e.Reason, ExcludeUnwitnessed)
		}
	}
	if len(excluded) != 3 {
		t.Errorf("excluded %+v: want 3 unwitnessed runs", excluded)
	}
	// Without the requirement every run counts.
	if results, _ := Accept(Reconcile(w.verified(), Agree), AcceptPolicy{Campaigns: p.Campaigns}); len(results) != 4 {
		t.Errorf("without RequireWitness: %d results, want 4", len(results))
	}
}

// TestAcceptWitnessedCampaignFillsFirst: where witnesses are required, the campaign other
// labs witnessed first fills a cell, not the one whose own lab dated it earlier; one
// witnessing lab alone cannot move that order by backdating its record.
func TestAcceptWitnessedCampaignFillsFirst(t *testing.T) {
	w := newAcceptWorld(t, 4)
	early, backdated := EnvelopeID([]byte("witnessed early")), EnvelopeID([]byte("backdated"))
	witness := func(name string, lab int, c string, at time.Time) {
		env, _, err := NewWitness(w.labs[lab].node, w.labs[lab].cert, c, at)
		if err != nil {
			t.Fatal(err)
		}
		w.put(name, env)
	}
	// Campaign "backdated" (lab 0's) claims to be older, but labs 1 and 2 saw it after
	// "witnessed early" (lab 3's); lab 1 backdates its witness of "backdated", alone.
	witness("e1", 1, early, t0.Add(-150*time.Minute))
	witness("e2", 2, early, t0.Add(-149*time.Minute))
	witness("b1", 1, backdated, t0.Add(-10*time.Hour))
	witness("b2", 2, backdated, t0.Add(-130*time.Minute))
	run := func(name string, lab int, c, cites string) {
		p := runPredicate(w.labs[lab].nodeID, w.labs[lab].lab.ID, 0, 0.5)
		p.Slot.Campaign, p.Witness = c, w.ids[cites]
		w.putRun(name, lab, p, name)
	}
	run("from-early", 3, early, "e1")
	run("from-backdated", 0, backdated, "b2")
	p := AcceptPolicy{RequireWitness: true, Campaigns: map[string]CampaignWindow{
		early:     {Created: t0.Add(-160 * time.Minute), Deadline: t0, Lab: w.labs[3].lab.ID},
		backdated: {Created: t0.Add(-20 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID},
	}}
	results, excluded := Accept(Reconcile(w.verified(), Agree), p)
	if len(results) != 1 || w.nameOf(results[0].AttestationID) != "from-early" {
		t.Fatalf("results %+v excluded %+v: want the run of the campaign witnessed first", results, excluded)
	}
	// Without witnesses the signed creation times decide.
	p.RequireWitness = false
	if results, _ := Accept(Reconcile(w.verified(), Agree), p); len(results) != 1 || w.nameOf(results[0].AttestationID) != "from-backdated" {
		t.Fatalf("without witnesses: %+v, want the campaign created first", results)
	}
}
