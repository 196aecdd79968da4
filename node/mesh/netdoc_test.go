package mesh

import (
	"fmt"
	"testing"
)

// The vote remembers at most maxVotingPeers peers: a full table takes no new peer, but a
// peer it holds still moves to the lab its latest claim names.
func TestDocVoteHeardIsBounded(t *testing.T) {
	d := &docVote{peerLab: map[string]string{}}
	for i := range maxVotingPeers + 10 {
		d.heard(fmt.Sprintf("peer%d", i), "lab-a")
	}
	if len(d.peerLab) != maxVotingPeers {
		t.Fatalf("peers remembered: %d, want %d", len(d.peerLab), maxVotingPeers)
	}
	if _, ok := d.peerLab[fmt.Sprintf("peer%d", maxVotingPeers)]; ok {
		t.Fatal("a peer past the bound was remembered")
	}
	d.heard("peer0", "lab-b")
	if got := d.peerLab["peer0"]; got != "lab-b" {
		t.Fatalf("a remembered peer's lab after its next claim: %q, want lab-b", got)
	}
}
