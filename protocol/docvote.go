package protocol

import (
	"slices"
	"sort"
)

// DocumentVerdict is what the network-document rule (docs/protocol-sync.md §6) decides from
// the heads a node heard: which document a majority of the network's active labs announce,
// and whether it differs from the node's own.
type DocumentVerdict struct {
	// Majority is the document hash more than half of the active labs announce; "" when no
	// document has such a majority.
	Majority string `json:"majority"`
	// Labs are the lab IDs announcing Majority, sorted.
	Labs []string `json:"labs"`
	// Mismatch is Majority != "" and not ours: the node claims nothing until it matches.
	Mismatch bool `json:"mismatch"`
}

// DocumentMajority counts one vote per active lab for the document it announces: our own
// lab votes for ours; another lab for the document in the latest head of one of its nodes,
// where labOf maps the peer to the lab its node certificate (checked against our trust
// store, as a claim's is) names. A head from a peer labOf does not know, or of a lab not in
// active (unknown, retired), has no vote: unauthenticated heads cannot stop a node, and a
// lab with many nodes counts once. Stale heads (a node gone) have no vote either.
func DocumentMajority(ours, ourLab string, active []string, heads []PeerHead, labOf map[string]string) DocumentVerdict {
	isActive := map[string]bool{}
	for _, l := range active {
		isActive[l] = true
	}
	type vote struct {
		doc  string
		head PeerHead
	}
	votes := map[string]vote{}
	for _, h := range heads {
		lab, ok := labOf[h.PeerID]
		if !ok || !isActive[lab] || lab == ourLab || h.Stale {
			continue
		}
		if v, ok := votes[lab]; ok && !h.LastHeard.After(v.head.LastHeard) {
			continue
		}
		votes[lab] = vote{h.NetworkDoc, h}
	}
	if isActive[ourLab] {
		votes[ourLab] = vote{doc: ours}
	}
	byDoc := map[string][]string{}
	for lab, v := range votes {
		byDoc[v.doc] = append(byDoc[v.doc], lab)
	}
	var d DocumentVerdict
	for doc, labs := range byDoc {
		if 2*len(labs) > len(isActive) {
			sort.Strings(labs)
			d = DocumentVerdict{Majority: doc, Labs: slices.Clip(labs), Mismatch: doc != ours}
		}
	}
	if d.Labs == nil {
		d.Labs = []string{}
	}
	return d
}
