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
// (repair). Pure functions: the node carries them out (node/pins.go).

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
}

// LedgerObjects lists, once each and sorted by CID, every object the stored campaigns and
// attestations name: each campaign's task bundles and agent images (by CID), and every
// subject with a CID of every run and re-score attestation (submission, logs, verdicts).
// Envelopes that do not decode are skipped (the store holds only verified ones).
func LedgerObjects(campaigns, attestations [][]byte) []LedgerObject {
	seen := map[string]string{}
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
		if err != nil || (run == nil && rs == nil) {
			continue
		}
		for _, s := range st.Subject {
			c, _ := s.Annotations[attest.AnnotationCID].(string)
			role, _ := s.Annotations[attest.AnnotationRole].(string)
			if role == "" {
				role = "object"
			}
			add(c, role)
		}
	}
	out := make([]LedgerObject, 0, len(seen))
	for c, what := range seen {
		out = append(out, LedgerObject{CID: c, What: what})
	}
	slices.SortFunc(out, func(a, b LedgerObject) int { return cmp.Compare(a.CID, b.CID) })
	return out
}
