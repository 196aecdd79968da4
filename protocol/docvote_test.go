package protocol

import (
	"testing"
	"time"
)

func TestDocumentMajority(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	active := []string{"labA", "labB", "labC"}
	head := func(peer, doc string, sec int) PeerHead {
		return PeerHead{PeerID: peer, NetworkDoc: doc, LastHeard: at.Add(time.Duration(sec) * time.Second)}
	}
	certified := map[string]string{"b1": "labB", "b2": "labB", "c1": "labC", "r1": "labR"}
	for _, tc := range []struct {
		name     string
		heads    []PeerHead
		active   []string
		majority string
		mismatch bool
	}{
		{"everyone agrees", []PeerHead{head("b1", "ours", 0), head("c1", "ours", 0)}, active, "ours", false},
		{"two other labs announce another", []PeerHead{head("b1", "new", 0), head("c1", "new", 0)}, active, "new", true},
		// Heads from peers without a checked certificate have no vote, however many.
		{"unauthenticated heads", []PeerHead{head("x1", "evil", 0), head("x2", "evil", 0), head("x3", "evil", 0), head("b1", "evil", 0)}, active, "", false},
		// A lab with many nodes counts once: its latest head.
		{"one lab, two nodes", []PeerHead{head("b1", "new", 0), head("b2", "new", 1)}, active, "", false},
		{"one lab, latest head wins", []PeerHead{head("b1", "new", 2), head("b2", "ours", 1), head("c1", "new", 0)}, active, "new", true},
		// A lab not active (retired, unknown) has no vote; the majority is of the active labs.
		{"retired lab", []PeerHead{head("r1", "new", 0), head("b1", "new", 0)}, active, "", false},
		{"stale heads", []PeerHead{{PeerID: "b1", NetworkDoc: "new", Stale: true}, {PeerID: "c1", NetworkDoc: "new", Stale: true}}, active, "", false},
		{"two active labs", []PeerHead{head("b1", "new", 0)}, []string{"labA", "labB"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := DocumentMajority("ours", "labA", tc.active, tc.heads, certified)
			if v.Majority != tc.majority || v.Mismatch != tc.mismatch {
				t.Fatalf("%+v, want majority %q mismatch %v", v, tc.majority, tc.mismatch)
			}
		})
	}
}
