package protocol

import (
	"slices"
	"testing"
	"time"

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
	want := []LedgerObject{{c.Tasks[0], "bundle"}, {c.Tasks[1], "bundle"}, {campaignTestCID("image"), "agent_image"}, {"bafkreisub", "submission"}}
	slices.SortFunc(want, func(a, b LedgerObject) int {
		if a.CID < b.CID {
			return -1
		}
		return 1
	})
	if !slices.Equal(got, want) {
		t.Errorf("LedgerObjects = %v, want %v (the logs subject has no CID)", got, want)
	}
}
