package attest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PredicateWitnessV1 marks a witness record: a node's signed statement that it holds a
// campaign, made when it first prepared it. A run cites one (RunPredicate.Witness) by a lab
// other than the campaign's own, which proves the run was signed after another lab had
// seen the campaign: a lab cannot sign runs of a campaign before it is public and have them
// count, whatever times it claims (docs/design.md §9, "Time witnessed by others").
const PredicateWitnessV1 = "https://evalmesh.dev/witness/v1"

// WitnessPredicate is a witness record's predicate. Its one subject is the campaign's
// envelope (sha256 of its bytes).
type WitnessPredicate struct {
	Campaign string    `json:"campaign"` // the campaign's ID (CID of its envelope)
	Node     string    `json:"node"`     // the signer's peer ID
	Lab      string    `json:"lab"`      // the signer's lab ID
	Time     time.Time `json:"time"`     // when the signer prepared the campaign, by its clock
}

func (w *WitnessPredicate) validate() error {
	switch {
	case w.Campaign == "":
		return errors.New("campaign is missing")
	case !strings.HasPrefix(w.Lab, "lab:"):
		return fmt.Errorf("lab %q is not a lab ID (lab:…)", w.Lab)
	case w.Node == "":
		return errors.New("node (the signer) is missing")
	case w.Time.IsZero():
		return errors.New("time is required")
	}
	_, err := bundleDigest(w.Campaign)
	return err
}

func decodeWitnessPredicate(st *Statement) (*WitnessPredicate, error) {
	var w WitnessPredicate
	if len(st.Predicate) == 0 {
		return nil, refuse(ReasonMalformedPredicate, "witness predicate is missing")
	}
	if err := strictUnmarshal(st.Predicate, &w, false); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "witness predicate: %v", err)
	}
	if err := w.validate(); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "witness predicate: %v", err)
	}
	d, _ := bundleDigest(w.Campaign)
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != d {
		return nil, refuse(ReasonMalformedPredicate, "witness of %s must have the campaign as its one subject (sha256 %s)", w.Campaign, d)
	}
	return &w, nil
}

// NewWitness signs a witness record of campaign (its ID) by the node of key, under cert,
// at now.
func NewWitness(key crypto.PrivKey, cert *NodeCert, campaign string, now time.Time) (envelope []byte, id string, err error) {
	node, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	d, err := bundleDigest(campaign)
	if err != nil {
		return nil, "", err
	}
	w := WitnessPredicate{Campaign: campaign, Node: node.String(), Lab: cert.Lab, Time: now.UTC().Truncate(time.Second)}
	st, err := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, PredicateWitnessV1, w)
	if err != nil {
		return nil, "", err
	}
	return Sign(key, cert, st)
}

// DecodeWitness decodes a witness record's statement (the envelope's payload).
func DecodeWitness(payload []byte) (*WitnessPredicate, error) {
	st, err := ParseStatement(payload)
	if err != nil {
		return nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	if st.PredicateType != PredicateWitnessV1 {
		return nil, refuse(ReasonMalformedPredicate, "predicate type %q is not a witness (%s)", st.PredicateType, PredicateWitnessV1)
	}
	return decodeWitnessPredicate(st)
}
