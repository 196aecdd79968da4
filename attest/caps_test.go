package attest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// capCampaign is one campaign of a caps case: its lab (index into the world), when it was
// created (minutes after t0-10h) and the agent specs it lists; its lab runs each once.
type capCampaign struct {
	id      string
	lab     int
	created int
	agents  []string
}

// TestCapsAtAdmission: a lab's campaigns are admitted in creation order (then ID) and a
// campaign that would take its lab past a cap is refused whole; so a lab cannot choose
// which of its runs count by naming agents to sort first or by making more campaigns, and
// no run of a campaign admitted earlier is dropped.
func TestCapsAtAdmission(t *testing.T) {
	cases := []struct {
		name                string
		agents, campaigns   int
		campaignsOf         []capCampaign
		wantRefused         []string // campaign IDs
		wantRefusedContains string
	}{{
		name: "agents named to sort first do not displace an earlier campaign's", agents: 2,
		campaignsOf: []capCampaign{
			{"first", 0, 0, []string{"solver"}},
			{"later", 0, 10, []string{"aaa-1", "aaa-2"}},
		},
		wantRefused: []string{"later"}, wantRefusedContains: "at most 2",
	}, {
		name: "a campaign ID that sorts first does not displace an earlier campaign", campaigns: 1,
		campaignsOf: []capCampaign{
			{"zzz-first", 0, 0, []string{"solver"}},
			{"000-later", 0, 10, []string{"solver"}},
		},
		wantRefused: []string{"000-later"}, wantRefusedContains: "at most 1",
	}, {
		name: "same creation: the campaign ID decides", campaigns: 1,
		campaignsOf: []capCampaign{
			{"b", 0, 0, []string{"solver"}},
			{"a", 0, 0, []string{"solver"}},
		},
		wantRefused: []string{"b"},
	}, {
		name: "a refused campaign takes nothing from its lab's allowance", agents: 2, campaigns: 2,
		campaignsOf: []capCampaign{
			{"c1", 0, 0, []string{"a"}},
			{"c2", 0, 10, []string{"b", "c"}},
			{"c3", 0, 20, []string{"b"}},
			{"c4", 0, 30, []string{"a"}},
		},
		wantRefused: []string{"c2", "c4"},
	}, {
		name: "agents already admitted add nothing", agents: 1,
		campaignsOf: []capCampaign{
			{"c1", 0, 0, []string{"a"}},
			{"c2", 0, 10, []string{"a"}},
		},
	}, {
		name: "caps are per lab", agents: 1, campaigns: 1,
		campaignsOf: []capCampaign{
			{"mine", 0, 0, []string{"a"}},
			{"mine-too", 0, 10, []string{"b"}},
			{"theirs", 1, 20, []string{"b"}},
		},
		wantRefused: []string{"mine-too"},
	}, {
		name: "no caps", campaignsOf: []capCampaign{
			{"c1", 0, 0, []string{"a"}},
			{"c2", 0, 10, []string{"b"}},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newAcceptWorld(t, 2)
			p := AcceptPolicy{MaxAgentsPerLab: tc.agents, MaxCampaignsPerLab: tc.campaigns, Campaigns: map[string]CampaignWindow{}}
			runsOf := map[string][]string{} // campaign → run names
			for _, c := range tc.campaignsOf {
				f := w.labs[c.lab]
				p.Campaigns[c.id] = CampaignWindow{Created: t0.Add(-10*time.Hour + time.Duration(c.created)*time.Minute), Deadline: t0, Lab: f.lab.ID, Agents: c.agents}
				for _, a := range c.agents {
					name := c.id + "/" + a
					pr := runPredicate(f.nodeID, f.lab.ID, 0, 0.5)
					pr.Slot.Campaign, pr.Slot.Agent, pr.Slot.Task = c.id, a, "task-"+c.id
					w.putRun(name, c.lab, pr, name)
					runsOf[c.id] = append(runsOf[c.id], name)
				}
			}
			o := Reconcile(w.verified(), Agree)
			refused := o.AdmitCampaigns(p)
			if got := slices.Sorted(maps.Keys(refused)); !slices.Equal(got, tc.wantRefused) && len(got)+len(tc.wantRefused) > 0 {
				t.Fatalf("refused %v, want %v", refused, tc.wantRefused)
			}
			for _, id := range tc.wantRefused {
				if !strings.Contains(refused[id], tc.wantRefusedContains) {
					t.Errorf("%s refused for %q, want it to say %q", id, refused[id], tc.wantRefusedContains)
				}
			}
			results, excluded := Accept(o, p)
			counted := map[string]bool{}
			for _, r := range results {
				counted[w.nameOf(r.AttestationID)] = true
			}
			why := map[string]Excluded{}
			for _, e := range excluded {
				why[w.nameOf(e.ID)] = e
			}
			for _, c := range tc.campaignsOf {
				for _, run := range runsOf[c.id] {
					_, isRefused := refused[c.id]
					switch {
					case isRefused && (counted[run] || why[run].Reason != ExcludeCampaignOverCap || why[run].Detail != refused[c.id]):
						t.Errorf("run %s of refused campaign %s: counted %v, excluded %+v; want %q", run, c.id, counted[run], why[run], ExcludeCampaignOverCap)
					case !isRefused && !counted[run]:
						t.Errorf("run %s of admitted campaign %s does not count: %+v", run, c.id, why[run])
					}
				}
			}
			if rs := o.RefusedCampaigns(p); len(rs) != len(refused) {
				t.Errorf("RefusedCampaigns %+v, AdmitCampaigns %v", rs, refused)
			}
		})
	}
}

// TestCapsAdmissionIsStable: admitting campaigns in any order of arrival — each step with
// the campaigns known so far, later ones created later — never refuses a campaign admitted
// at an earlier step: a lab cannot make a counted campaign stop counting by adding more.
func TestCapsAdmissionIsStable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		p := AcceptPolicy{MaxAgentsPerLab: 1 + r.IntN(4), MaxCampaignsPerLab: r.IntN(4), Campaigns: map[string]CampaignWindow{}}
		var o Outcome
		admitted := map[string]bool{}
		for step := 0; step < 12; step++ {
			id := fmt.Sprintf("%08x", r.Uint32())
			var agents []string
			for range 1 + r.IntN(3) {
				agents = append(agents, fmt.Sprint("agent-", r.IntN(6)))
			}
			p.Campaigns[id] = CampaignWindow{Created: t0.Add(time.Duration(step) * time.Minute), Deadline: t0.Add(time.Hour), Lab: fmt.Sprint("lab", r.IntN(2)), Agents: agents}
			refused := o.AdmitCampaigns(p)
			for c := range admitted {
				if _, out := refused[c]; out {
					t.Fatalf("trial %d step %d: campaign %s, admitted before, refused once %s arrived: %s", trial, step, c, id, refused[c])
				}
			}
			if _, out := refused[id]; !out {
				admitted[id] = true
			}
		}
	}
}

// TestCapsWitnessOrder: where witnesses are required, the campaigns are admitted in the
// order other labs witnessed them, so a lab backdating a new campaign cannot put it ahead
// of one already admitted; a campaign no other lab witnessed takes no place.
func TestCapsWitnessOrder(t *testing.T) {
	w := newAcceptWorld(t, 3)
	witness := func(name string, lab int, c string, at time.Time) {
		env, _, err := NewWitness(w.labs[lab].node, w.labs[lab].cert, c, at)
		if err != nil {
			t.Fatal(err)
		}
		w.put(name, env)
	}
	lab0 := w.labs[0].lab.ID
	first, backdated, unwitnessed := EnvelopeID([]byte("first")), EnvelopeID([]byte("backdated")), EnvelopeID([]byte("unwitnessed"))
	witness("honest-1", 1, first, t0.Add(-9*time.Hour))
	witness("honest-2", 2, first, t0.Add(-9*time.Hour))
	witness("backdated-1", 1, backdated, t0.Add(-5*time.Hour))
	witness("backdated-2", 2, backdated, t0.Add(-5*time.Hour))
	p := AcceptPolicy{RequireWitness: true, MaxCampaignsPerLab: 1, Campaigns: map[string]CampaignWindow{
		first:       {Created: t0.Add(-9 * time.Hour), Deadline: t0, Lab: lab0},
		backdated:   {Created: t0.Add(-20 * time.Hour), Deadline: t0, Lab: lab0},
		unwitnessed: {Created: t0.Add(-30 * time.Hour), Deadline: t0, Lab: lab0},
	}}
	o := Reconcile(w.verified(), Agree)
	refused := o.AdmitCampaigns(p)
	if got := slices.Sorted(maps.Keys(refused)); !slices.Equal(got, []string{backdated}) {
		t.Fatalf("refused %v: want the backdated campaign alone (witnessed after the first; the unwitnessed one takes no place)", refused)
	}
	p.RequireWitness = false
	if got := slices.Sorted(maps.Keys(o.AdmitCampaigns(p))); !slices.Equal(got, slices.Sorted(slices.Values([]string{backdated, first}))) {
		t.Fatalf("without witnesses the signed creation decides: refused %v, want backdated and first", got)
	}
}
