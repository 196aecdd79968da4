package protocol

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
)

// Runners without labels (ledger.scorers; attest/scorers.go). For a sealed task bundle the
// document may name the labs that score it: only they are granted its key, they do not run
// its slots, and its runs are signed by labs without the key and counted with the scoring
// labs' majority verdict. Absent, the default, is today's rule (key holders run and score,
// others wait for a grant), and keeps the canonical form and the hash of older documents.

// normalizeScorers checks ledger.scorers: each key a bundle CID, each list the names of
// labs of the document that list an age recipient (they are granted the key), sorted; at
// least one active lab must be left to run the task. An empty map is absent.
func (d *NetworkDoc) normalizeScorers() error {
	p := &d.Ledger
	if len(p.Scorers) == 0 {
		p.Scorers = nil
		return nil
	}
	labs := map[string]NetworkLab{}
	active := 0
	for _, l := range d.Labs {
		labs[l.Name] = l
		if l.Retired == nil {
			active++
		}
	}
	for bundle, names := range p.Scorers {
		if _, err := cid.Decode(bundle); err != nil {
			return fmt.Errorf("network document: ledger.scorers: %q is not a bundle CID (give the sealed bundle's CID, as `evalmesh task seal` prints it): %v", bundle, err)
		}
		if len(names) == 0 {
			return fmt.Errorf("network document: ledger.scorers[%s]: no lab named; name the labs that score the task, or leave the bundle out", bundle)
		}
		s := slices.Clone(names)
		slices.Sort(s)
		s = slices.Compact(s)
		runners := active
		for _, n := range s {
			l, ok := labs[n]
			if !ok {
				return fmt.Errorf("network document: ledger.scorers[%s]: lab %q is not in labs", bundle, n)
			}
			if l.AgeRecipient == "" {
				return fmt.Errorf("network document: ledger.scorers[%s]: lab %q lists no age_recipient: a scoring lab is granted the key, add its recipient (evalmesh trust add --lab LABDIR)", bundle, n)
			}
			if l.Retired == nil {
				runners--
			}
		}
		if runners < 1 {
			return fmt.Errorf("network document: ledger.scorers[%s]: every active lab scores the task, so no lab without its key is left to run it; leave at least one lab out", bundle)
		}
		p.Scorers[bundle] = s
	}
	return nil
}

// ScorersOf is the names of the labs that score the sealed bundle, sorted (nil when the
// document names none: its key holders run and score it).
func (d *NetworkDoc) ScorersOf(bundle string) []string {
	return slices.Clone(d.Ledger.Scorers[bundle])
}

// scorerIDs is ledger.scorers by lab ID (attest.AcceptPolicy.Scorers); nil when absent.
func (d *NetworkDoc) scorerIDs() map[string][]string {
	if len(d.Ledger.Scorers) == 0 {
		return nil
	}
	ids := map[string]string{}
	for _, l := range d.Labs {
		k, _ := base64.StdEncoding.DecodeString(l.Key)
		ids[l.Name] = attest.LabID(k)
	}
	out := map[string][]string{}
	for _, bundle := range slices.Sorted(maps.Keys(d.Ledger.Scorers)) {
		var s []string
		for _, n := range d.Ledger.Scorers[bundle] {
			s = append(s, ids[n])
		}
		slices.Sort(s)
		out[bundle] = s
	}
	return out
}
