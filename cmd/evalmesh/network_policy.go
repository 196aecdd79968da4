package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// networkPolicy is what every node of a network must compute its ledger with.
type networkPolicy struct {
	Doc     *protocol.NetworkDoc // nil without HOME/network.json
	Trust   *attest.TrustStore   // the document's labs; nil without a document
	Policy  attest.AcceptPolicy
	Scoring scoring.Options
	// Warn, when set, is said at WARN when the daemon starts: a document from before
	// signatures (no "signatures" field) that a majority of its labs has not signed.
	Warn string
}

// loadNetworkPolicy reads HOME/network.json: the network's labs and ledger options. Without
// it, the node uses `evalmesh ledger`'s defaults (isolated runs only, no replication).
func loadNetworkPolicy(h home.Home, network string) (networkPolicy, error) {
	np := networkPolicy{Scoring: scoring.Options{Worst: "population", BootstrapRounds: 100}}
	path := h.NetworkDocPath()
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return np, nil
	}
	if err != nil {
		return np, err
	}
	doc, err := protocol.ParseNetworkDoc(raw)
	if err != nil {
		return np, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Network != network {
		return np, fmt.Errorf("%s is the document of network %q, but config network: is %q: fix one of them", path, doc.Network, network)
	}
	if np.Warn, err = networkDocInEffect(doc, path); err != nil {
		return np, err
	}
	if np.Trust, err = doc.TrustStore(); err != nil {
		return np, err
	}
	if err := addHomeRevocations(h, np.Trust); err != nil {
		return np, err
	}
	np.Doc = doc
	np.Scoring = doc.ScoringOptions()
	np.Policy = doc.AcceptPolicy()
	return np, nil
}

// addHomeRevocations adds to trust, the network document's labs, the revocations of
// HOME/trust.yaml (where `evalmesh trust add --revocation` puts them): the document lists
// the labs, but a lab's revocation of its own node must not wait for a new document signed
// by a majority, since it only takes trust away (attest.TrustStore.AddRevocation). The
// file's labs and directly trusted nodes are not used: under a document, it trusts no one.
func addHomeRevocations(h home.Home, trust *attest.TrustStore) error {
	path := h.TrustPath()
	ts, err := attest.LoadTrust(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (under a network document only its revocations are read; fix or remove it)", err)
	}
	for _, r := range ts.Revocations() {
		if err := trust.AddRevocation(r); err != nil {
			return fmt.Errorf("trust file %s: revocation %s: %w", path, r.ID, err)
		}
	}
	return nil
}

// networkDocInEffect decides whether a node may run the document at path: one of two or more
// labs takes effect once more than half of its active labs have signed it. A document with
// no "signatures" field at all (from before signatures) still runs, with a warning: a
// transition that later versions will end.
func networkDocInEffect(doc *protocol.NetworkDoc, path string) (warn string, err error) {
	if len(doc.Labs) < 2 {
		return "", nil
	}
	r := doc.SignatureReport()
	if r.Majority {
		return "", nil
	}
	if doc.Signatures == nil {
		return fmt.Sprintf("network document is not signed by a majority of its labs (see evalmesh network sign): %s has no signatures; unsigned documents will be refused by later versions", path), nil
	}
	signed := "none"
	if len(r.Signers) > 0 {
		signed = strings.Join(r.Signers, ", ")
	}
	msg := fmt.Sprintf("%s (hash %s) is not in effect: %d of its active labs must sign it, signed by %s, not by %s; each lab runs `evalmesh network sign %s --lab LABDIR` where its lab key is kept, then the signed file goes to every node",
		path, doc.Hash(), r.Needed, signed, strings.Join(r.Missing, ", "), path)
	if len(r.Ignored) > 0 {
		msg += " (ignored: " + strings.Join(r.Ignored, "; ") + ")"
	}
	return "", errors.New(msg)
}
