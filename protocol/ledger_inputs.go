package protocol

import (
	"cmp"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
)

// LedgerCampaign is what the ledger takes from one campaign a node has prepared (its
// bundles fetched, its agent specs read).
type LedgerCampaign struct {
	ID       string
	Lab      string // the lab ID that signed the campaign
	LabName  string // the name the trust store knows the campaign's lab by
	Created  time.Time
	Deadline time.Time
	// Tasks maps each bundle CID to the metadata read from that bundle (its own name,
	// metric, SOTA): never another bundle's, whatever its name.
	Tasks map[string]scoring.TaskInfo
	// Agents maps each agent spec CID to the spec's name.
	Agents map[string]string
	// Deterministic and Unauditable mark agent spec CIDs whose spec declares them
	// deterministic, or asks for a network (no other lab can re-run them alike): what the
	// ledger's audit rules read (attest.CampaignWindow).
	Deterministic, Unauditable map[string]bool
}

// AddAgent lists the agent spec of CID cid in the campaign: its name, and what the audit
// rules read of it (deterministic; unauditable when it asks for a network, which other labs
// cannot reproduce).
func (c *LedgerCampaign) AddAgent(cid string, spec *agentspec.Spec) {
	if c.Agents == nil {
		c.Agents = map[string]string{}
	}
	c.Agents[cid] = spec.Name
	if spec.Deterministic {
		if c.Deterministic == nil {
			c.Deterministic = map[string]bool{}
		}
		c.Deterministic[cid] = true
	}
	if spec.WantsNetwork() {
		if c.Unauditable == nil {
			c.Unauditable = map[string]bool{}
		}
		c.Unauditable[cid] = true
	}
}

// LedgerNames is how the ledger names and bounds what campaigns list (docs/design.md §9,
// "Agents and tasks by identity"): results aggregate by bundle CID and agent spec CID, and
// every CID gets a display name of its own (attest.UniqueNames).
type LedgerNames struct {
	Tasks       []scoring.TaskInfo // one per bundle CID, under its unique name, sorted by name
	TaskNames   map[string]string  // bundle CID → unique task name
	AgentNames  map[string]string  // spec CID → unique agent name (attest.UniqueNames)
	AgentOwners map[string]string  // spec CID → lab of the first campaign that lists it
	Windows     map[string]attest.CampaignWindow
}

// NamesOf derives the ledger's names from campaigns, in any order: a pure function, so
// every node that prepared the same campaigns names them alike. An agent's owner is the lab
// of the first campaign, by creation then ID, that lists it.
func NamesOf(campaigns []LedgerCampaign) LedgerNames {
	cs := slices.Clone(campaigns)
	slices.SortFunc(cs, func(a, b LedgerCampaign) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	out := LedgerNames{TaskNames: map[string]string{}, AgentNames: map[string]string{}, AgentOwners: map[string]string{},
		Windows: map[string]attest.CampaignWindow{}}
	infos := map[string]scoring.TaskInfo{}
	bundleNames := map[string]string{}
	for _, c := range cs {
		agents := make([]string, 0, len(c.Agents))
		for cid := range c.Agents {
			agents = append(agents, cid)
		}
		slices.Sort(agents)
		out.Windows[c.ID] = attest.CampaignWindow{Created: c.Created, Deadline: c.Deadline, Lab: c.Lab, Agents: agents,
			Deterministic: sortedTrue(c.Deterministic), Unauditable: sortedTrue(c.Unauditable)}
		for cid, t := range c.Tasks {
			if _, ok := infos[cid]; !ok {
				infos[cid], bundleNames[cid] = t, t.Name
			}
		}
		for cid, name := range c.Agents {
			if _, ok := out.AgentNames[cid]; !ok {
				out.AgentNames[cid], out.AgentOwners[cid] = name, c.LabName
			}
		}
	}
	out.TaskNames = attest.UniqueNames(bundleNames, nil)
	out.AgentNames = attest.UniqueNames(out.AgentNames, out.AgentOwners)
	for cid, t := range infos {
		t.Name = out.TaskNames[cid]
		out.Tasks = append(out.Tasks, t)
	}
	slices.SortFunc(out.Tasks, func(a, b scoring.TaskInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// sortedTrue is the keys of m set to true, sorted (nil for none).
func sortedTrue(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
