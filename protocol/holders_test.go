package protocol

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
)

func set(labs ...string) func(string) bool {
	return func(l string) bool { return slices.Contains(labs, l) }
}

func TestHolderOrderIsTheSameOnEveryNode(t *testing.T) {
	labs := []string{"lab:a", "lab:b", "lab:c", "lab:d"}
	want := HolderOrder("bafyobject", labs)
	for _, perm := range [][]string{{"lab:d", "lab:c", "lab:b", "lab:a"}, {"lab:b", "lab:d", "lab:a", "lab:c", "lab:a"}} {
		if got := HolderOrder("bafyobject", perm); !slices.Equal(got, want) {
			t.Errorf("order of %v: %v, want %v (input order or duplicates must not matter)", perm, got, want)
		}
	}
	// Objects spread over the labs: over many objects each lab is first for some.
	first := map[string]int{}
	for i := range 400 {
		first[HolderOrder(string(rune('a'+i%26))+string(rune('0'+i/26)), labs)[0]]++
	}
	for _, l := range labs {
		if first[l] < 50 {
			t.Errorf("lab %s first for %d of 400 objects: the order does not spread them", l, first[l])
		}
	}
}

func TestPinStatus(t *testing.T) {
	labs := []string{"lab:a", "lab:b", "lab:c"}
	order := HolderOrder("bafyobj", labs) // o0, o1, o2
	o0, o1, o2 := order[0], order[1], order[2]
	all := set(labs...)
	for _, tc := range []struct {
		name     string
		factor   int
		eligible func(string) bool
		holding  func(string) bool
		assigned []string
		holders  []string
		fetch    []string
		met      bool
	}{
		{"nobody holds it: the first two in order fetch", 2, all, set(), []string{o0, o1}, []string{}, []string{o0, o1}, false},
		{"the two first hold it: met, nothing to fetch", 2, all, set(o0, o1), []string{o0, o1}, []string{o0, o1}, []string{}, true},
		{"a holder left: the next in order is assigned and fetches (repair)", 2, set(o1, o2), set(o0, o1), []string{o1, o2}, []string{o1}, []string{o2}, false},
		{"repaired: the one that left does not count", 2, set(o1, o2), set(o0, o1, o2), []string{o1, o2}, []string{o1, o2}, []string{}, true},
		{"both original holders left: the last lab is all there is", 2, set(o2), set(o2), []string{o2}, []string{o2}, []string{}, false},
		{"holders stay holders: nothing moves while the factor is met", 2, all, set(o1, o2), []string{o1, o2}, []string{o1, o2}, []string{}, true},
		{"one holder: the first non-holder in order fetches", 2, all, set(o1), []string{o0, o1}, []string{o1}, []string{o0}, false},
		{"an extra holder is kept", 2, all, set(o0, o1, o2), []string{o0, o1, o2}, []string{o0, o1, o2}, []string{}, true},
		{"a lab without the key is never assigned", 2, set(o0, o2), set(), []string{o0, o2}, []string{}, []string{o0, o2}, false},
		{"factor 3 of 3", 3, all, set(o2), []string{o0, o1, o2}, []string{o2}, []string{o0, o1}, false},
		{"lost a block: a holder that no longer holds it is replaced in order", 2, all, set(o0), []string{o0, o1}, []string{o0}, []string{o1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := PinStatus("bafyobj", labs, tc.factor, tc.eligible, tc.holding)
			if !slices.Equal(st.Assigned, tc.assigned) || !slices.Equal(st.Holding, tc.holders) || !slices.Equal(st.Fetch, tc.fetch) || st.Met != tc.met {
				t.Errorf("got assigned %v holding %v fetch %v met %v; want %v %v %v %v", st.Assigned, st.Holding, st.Fetch, st.Met, tc.assigned, tc.holders, tc.fetch, tc.met)
			}
		})
	}
}

func TestNetworkDocPinFactor(t *testing.T) {
	retired := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	labs := func(n int) []NetworkLab {
		var ls []NetworkLab
		for i := range n {
			ls = append(ls, NetworkLab{Name: string(rune('a' + i))})
		}
		return ls
	}
	for _, tc := range []struct {
		name   string
		labs   []NetworkLab
		factor int
		want   int
	}{
		{"default 2", labs(3), 0, 2},
		{"all when fewer", labs(1), 0, 1},
		{"the document's", labs(4), 3, 3},
		{"capped at the labs", labs(2), 5, 2},
		{"retired labs do not hold", append(labs(2), NetworkLab{Name: "z", Retired: &retired}), 3, 2},
	} {
		d := &NetworkDoc{Labs: tc.labs, Ledger: LedgerPolicy{PinFactor: tc.factor}}
		if got := d.PinFactor(); got != tc.want {
			t.Errorf("%s: PinFactor %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLedgerObjectsNamesBundlesAgentImagesAndSubjects(t *testing.T) {
	f, err := attestgen.New("lab1")
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.Run(0)
	if err != nil {
		t.Fatal(err)
	}
	c := campaignFixture(2, 1, 1)
	spec := campaignTestSpec("imaged")
	spec.Image, spec.ImageCID = "sha256:0000000000000000000000000000000000000000000000000000000000000000", campaignTestCID("image")
	c.Agents = append(c.Agents, NewCampaignAgent(spec))
	camp, _, err := SignCampaign(newCampaignLab(t), c)
	if err != nil {
		t.Fatal(err)
	}
	got := LedgerObjects([][]byte{camp, []byte("not an envelope")}, [][]byte{run, run})
	want := []LedgerObject{{CID: c.Tasks[0], What: "bundle"}, {CID: c.Tasks[1], What: "bundle"}, {CID: campaignTestCID("image"), What: "agent_image"}, {CID: "bafkreisub", What: "submission"}}
	slices.SortFunc(want, func(a, b LedgerObject) int {
		if a.CID < b.CID {
			return -1
		}
		return 1
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LedgerObjects = %v, want %v (the logs subject has no CID)", got, want)
	}
}

// grantTo signs, by f's node, a grant of bundle's key to lab (the wrapped key is a fresh
// age key: what it opens does not matter to who holds what).
func grantTo(t *testing.T, f *attestgen.Fixture, bundle, lab string) []byte {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := attest.NewGrant(f.Node, f.Cert, bundle, lab, id.Recipient().String(), id.String(), attestgen.Base)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// A sealed bundle (one the stored grants name) carries the labs granted its key, once each
// and sorted however the grants arrive; a bundle without grants and every other object
// carry none.
func TestLedgerObjectsNameTheLabsHoldingASealedBundlesKey(t *testing.T) {
	f, err := attestgen.New("lab1")
	if err != nil {
		t.Fatal(err)
	}
	c := campaignFixture(2, 1, 1)
	camp, _, err := SignCampaign(newCampaignLab(t), c)
	if err != nil {
		t.Fatal(err)
	}
	sealed, plain := c.Tasks[0], c.Tasks[1]
	grants := [][]byte{grantTo(t, f, sealed, "lab:zz"), grantTo(t, f, sealed, "lab:aa"), grantTo(t, f, sealed, "lab:zz"), grantTo(t, f, campaignTestCID("elsewhere"), "lab:bb")}
	got := LedgerObjects([][]byte{camp}, grants)
	want := []LedgerObject{{CID: sealed, What: "bundle", KeyLabs: []string{"lab:aa", "lab:zz"}}, {CID: plain, What: "bundle"}}
	slices.SortFunc(want, func(a, b LedgerObject) int { return strings.Compare(a.CID, b.CID) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LedgerObjects = %+v, want %+v (a grant is no ledger object; only the campaign's sealed bundle has key labs)", got, want)
	}
	if kl := KeyLabs(grants); !slices.Equal(kl[sealed], []string{"lab:aa", "lab:zz"}) || !slices.Equal(kl[campaignTestCID("elsewhere")], []string{"lab:bb"}) || len(kl) != 2 {
		t.Errorf("KeyLabs = %v", kl)
	}
}

// For a sealed bundle only the labs granted its key count toward its factor, capped at how
// many of them are active; a lab without the key that holds it is neither counted nor
// assigned, and a key holder is told to fetch instead.
func TestPinStatusOfASealedBundleCountsOnlyKeyHolders(t *testing.T) {
	labs := []string{"lab:a", "lab:b", "lab:c", "lab:d"}
	order := HolderOrder("bafysealed", labs)
	o0, o1, o2, o3 := order[0], order[1], order[2], order[3]
	all := set(labs...)
	for _, tc := range []struct {
		name     string
		keyLabs  []string
		factor   int
		holding  func(string) bool
		counting []string
		wantF    int
		assigned []string
		fetch    []string
		met      bool
	}{
		{"not sealed: every lab counts", nil, 2, set(o0, o1), labs, 2, []string{o0, o1}, []string{}, true},
		{"holders without the key do not meet it: the key holders fetch", []string{o2, o3}, 2, set(o0, o1), []string{o2, o3}, 2, []string{o2, o3}, []string{o2, o3}, false},
		{"one keyless holder, one key holder: the other key holder fetches", []string{o1, o3}, 2, set(o0, o1), []string{o1, o3}, 2, []string{o1, o3}, []string{o3}, false},
		{"met by the key holders alone", []string{o0, o2}, 2, set(o0, o1, o2), []string{o0, o2}, 2, []string{o0, o2}, []string{}, true},
		{"one key holder: the factor is 1 (all when fewer)", []string{o3}, 2, set(o0, o1), []string{o3}, 1, []string{o3}, []string{o3}, false},
		{"a grant to a lab not in the network counts for nothing", []string{o1, "lab:gone"}, 2, set(o1), []string{o1}, 1, []string{o1}, []string{}, true},
		{"no active lab holds the key: its bytes are still kept by factor labs", []string{"lab:gone"}, 2, set(), labs, 2, []string{o0, o1}, []string{o0, o1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := LedgerObject{CID: "bafysealed", What: "bundle", KeyLabs: tc.keyLabs}
			counting, f := o.Counting(labs, tc.factor)
			if !slices.Equal(HolderOrder("x", counting), HolderOrder("x", tc.counting)) || f != tc.wantF {
				t.Fatalf("Counting: %v factor %d; want %v factor %d", counting, f, tc.counting, tc.wantF)
			}
			st := PinStatus(o.CID, counting, f, all, tc.holding)
			if !slices.Equal(st.Assigned, tc.assigned) || !slices.Equal(st.Fetch, tc.fetch) || st.Met != tc.met || st.Factor != tc.wantF {
				t.Errorf("got assigned %v fetch %v met %v factor %d; want %v %v %v %d", st.Assigned, st.Fetch, st.Met, st.Factor, tc.assigned, tc.fetch, tc.met, tc.wantF)
			}
		})
	}
}

// A re-score of a run that attested no submission names the run attestation itself (role
// "run", runner.RescoreMissing): an envelope every node syncs, not an object to pin.
func TestLedgerObjectsSkipARescoresRunSubject(t *testing.T) {
	f, err := attestgen.New("lab1")
	if err != nil {
		t.Fatal(err)
	}
	runEnv, err := f.Run(0)
	if err != nil {
		t.Fatal(err)
	}
	runID := attest.EnvelopeID(runEnv)
	st, err := attest.NewStatement([]attest.Subject{{Name: "run.json", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)},
		Annotations: map[string]any{attest.AnnotationCID: runID, attest.AnnotationRole: "run"}}}, attest.PredicateRescoreV1,
		attest.RescorePredicate{Run: runID, Valid: false, Metric: "accuracy", Evaluator: "builtin:accuracy", Node: f.NodeID, Lab: f.Lab.ID, Time: attestgen.Base})
	if err != nil {
		t.Fatal(err)
	}
	rescore, _, err := attest.Sign(f.Node, f.Cert, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range LedgerObjects(nil, [][]byte{runEnv, rescore}) {
		if o.CID == runID {
			t.Errorf("LedgerObjects lists the re-scored run attestation %s (%s) as an object to pin", runID, o.What)
		}
	}
}
