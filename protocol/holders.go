package protocol

import (
	"cmp"
	"slices"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
)

// Who must hold what (docs/protocol-sync.md §8). Every object a counted result depends on —
// the task bundle, the submission, the log archive, the judge's verdicts, the agent image
// when it travels by CID — is held by PinFactor labs, chosen by rendezvous order over the
// labs that are present: every node computes the same holders from the same inputs, with
// no coordination, and when a holder leaves the next lab in the order takes its place
// (repair). Pure functions: the node carries them out (node/pins/pins.go).

// DefaultPinFactor is how many labs hold each object when the network document says nothing.
const DefaultPinFactor = 2

// PinFactor is how many labs must hold each object the ledger rests on: the document's
// ledger.pin_factor (default DefaultPinFactor), and all the active labs when they are fewer.
func (d *NetworkDoc) PinFactor() int {
	f := d.Ledger.PinFactor
	if f <= 0 {
		f = DefaultPinFactor
	}
	active := 0
	for _, l := range d.Labs {
		if l.Retired == nil {
			active++
		}
	}
	return max(min(f, active), 1)
}

// HolderOrder is the labs in rendezvous order for object: highest RendezvousScore(object,
// lab) first, ties by lab ID.
func HolderOrder(object string, labs []string) []string {
	out := slices.Clone(labs)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(RendezvousScore(object, b), RendezvousScore(object, a)), cmp.Compare(a, b))
	})
	return slices.Compact(out)
}

// PinState is who holds one object and who must.
type PinState struct {
	Object string `json:"cid"`
	Factor int    `json:"factor"`
	// Assigned are the labs that must hold it, in HolderOrder: the eligible labs that hold
	// it, then as many eligible labs that do not as the factor still needs, in HolderOrder.
	// Holders are kept where they are (nothing moves while the factor is met); a missing
	// holder is replaced by the next lab in the order.
	Assigned []string `json:"assigned"`
	// Holding are the eligible labs that say they hold it, in HolderOrder.
	Holding []string `json:"holding"`
	// Fetch are the assigned labs that do not hold it yet: each fetches and pins it.
	Fetch []string `json:"fetch"`
	// Met: at least Factor eligible labs hold it.
	Met bool `json:"met"`
}

// PinStatus decides who must hold object among labs: eligible says whether a lab counts
// (its node is present; for what a sealed bundle's key is needed for, it holds a grant),
// holding whether it says it holds the object. While fewer than factor eligible labs hold
// it, the first eligible labs in HolderOrder that do not are told to fetch it, as many as
// are missing: a lab that left or lost the object is replaced by the next in the order.
func PinStatus(object string, labs []string, factor int, eligible, holding func(lab string) bool) PinState {
	st := PinState{Object: object, Factor: factor, Assigned: []string{}, Holding: []string{}, Fetch: []string{}}
	order := HolderOrder(object, labs)
	for _, lab := range order {
		if eligible(lab) && holding(lab) {
			st.Holding = append(st.Holding, lab)
		}
	}
	missing := factor - len(st.Holding)
	for _, lab := range order {
		if !eligible(lab) {
			continue
		}
		switch {
		case holding(lab):
			st.Assigned = append(st.Assigned, lab)
		case missing > 0:
			st.Assigned = append(st.Assigned, lab)
			st.Fetch = append(st.Fetch, lab)
			missing--
		}
	}
	st.Met = len(st.Holding) >= factor
	return st
}

// LedgerObject is one object the ledger rests on, and why.
type LedgerObject struct {
	CID  string `json:"cid"`
	What string `json:"what"` // "bundle", "agent_image", or the subject's role ("submission", "logs", …)
	// KeyLabs are, for a sealed bundle, the labs the stored grants give its key to (sorted,
	// once each); nil for any other object. Only they count toward its factor (Counting).
	KeyLabs []string `json:"key_labs,omitempty"`
}

// Counting returns the labs among labs (the network's active labs) whose holding of o counts
// toward its factor, and that factor. A sealed bundle is of use only to a lab that can open
// its key — to re-score a run of it from its own copy — so only the labs granted the key
// count, and the factor is capped at how many of them are active ("all when fewer"), as
// NetworkDoc.PinFactor caps it at the active labs. When no active lab holds a grant (every
// grantee retired), nobody can open it, and its bytes are still kept by factor labs of all.
// Every other object (a sealed task's submissions and logs included: they are not
// encrypted, and re-scoring them needs the bundle's key, not the holder's) counts all labs.
func (o LedgerObject) Counting(labs []string, factor int) ([]string, int) {
	if o.KeyLabs == nil {
		return labs, factor
	}
	var keyed []string
	for _, l := range labs {
		if slices.Contains(o.KeyLabs, l) {
			keyed = append(keyed, l)
		}
	}
	if len(keyed) == 0 {
		return labs, factor
	}
	return keyed, max(min(factor, len(keyed)), 1)
}

// KeyLabs maps each bundle that grants among attestations name to the labs granted its key,
// sorted, once each (only a sealed bundle's key is granted, so a bundle in the map is
// sealed). The envelopes are those of a verified store: a grant is signed by a node of a
// lab of the network; whether its wrapped key opens is for its grantee alone to know.
func KeyLabs(attestations [][]byte) map[string][]string {
	out := map[string][]string{}
	for _, env := range attestations {
		if g, ok, _ := attest.GrantOf(env); ok {
			addKeyLab(out, g)
		}
	}
	return out
}

func addKeyLab(m map[string][]string, g *attest.GrantPredicate) {
	if i, found := slices.BinarySearch(m[g.Bundle], g.Lab); !found {
		m[g.Bundle] = slices.Insert(m[g.Bundle], i, g.Lab)
	}
}

// roleRun is the role of the subject of a re-score of a run that attested no submission
// (runner.RescoreMissing): the run attestation itself, its CID the attestation's ID. It is
// an envelope of the attestation set, which every node syncs whole, not a block any
// blockstore holds, so it is no object to pin (counted as one, it stayed under its factor
// forever, and every repair round waited out a fetch of it).
const roleRun = "run"

// LedgerObjects lists, once each and sorted by CID, every object the stored campaigns and
// attestations name: each campaign's task bundles and agent images (by CID), and every
// subject with a CID of every run and re-score attestation (submission, logs, verdicts;
// not a re-score's "run" subject, roleRun). A bundle the attestations' grants name carries its KeyLabs (KeyLabs). Envelopes that do
// not decode are skipped (the store holds only verified ones).
func LedgerObjects(campaigns, attestations [][]byte) []LedgerObject {
	seen := map[string]string{}
	keyLabs := map[string][]string{}
	add := func(c, what string) {
		if c != "" {
			if _, ok := seen[c]; !ok {
				seen[c] = what
			}
		}
	}
	for _, env := range campaigns {
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			continue
		}
		c, err := DecodeCampaign(e.Payload)
		if err != nil {
			continue
		}
		for _, t := range c.Tasks {
			add(t, "bundle")
		}
		for _, a := range c.Agents {
			if spec, err := agentspec.Parse(a.Spec); err == nil {
				add(spec.ImageCID, "agent_image")
			}
		}
	}
	for _, env := range attestations {
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			continue
		}
		st, run, rs, err := attest.DecodeStatement(e.Payload)
		if err == nil && st.PredicateType == attest.PredicateGrantV1 {
			if g, err := attest.DecodeGrant(e.Payload); err == nil {
				addKeyLab(keyLabs, g)
			}
			continue
		}
		if err != nil || (run == nil && rs == nil) {
			continue
		}
		for _, s := range st.Subject {
			c, _ := s.Annotations[attest.AnnotationCID].(string)
			role, _ := s.Annotations[attest.AnnotationRole].(string)
			if role == roleRun {
				continue
			}
			if role == "" {
				role = "object"
			}
			add(c, role)
		}
	}
	out := make([]LedgerObject, 0, len(seen))
	for c, what := range seen {
		o := LedgerObject{CID: c, What: what}
		if what == "bundle" {
			o.KeyLabs = keyLabs[c]
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b LedgerObject) int { return cmp.Compare(a.CID, b.CID) })
	return out
}
