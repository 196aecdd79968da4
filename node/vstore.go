package node

import (
	"bytes"
	"errors"
	"os"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

func loadHomeTrust(h home.Home) (*attest.TrustStore, error) {
	if _, err := os.Stat(h.TrustPath()); errors.Is(err, os.ErrNotExist) {
		return attest.NewTrustStore(), nil
	}
	return attest.LoadTrust(h.TrustPath())
}

// campaignOrderKey is a campaign's order key in the store: its creation time, Unix seconds.
func campaignOrderKey(v *protocol.VerifiedCampaign) uint64 {
	return uint64(max(v.Campaign.Created.Unix(), 0))
}

// admitCampaign takes into the store, without verifying or hashing it again, the campaign
// the gossip validator verified (protocol.CampaignValueValidator: at the time it arrived,
// under the mesh's trust store, which is the store's, and this node's network), under the
// digest that verification computed of these same bytes. The validator's verdict
// implies the store's own (verifyStoredCampaign, at the campaign's creation): a
// well-formed body's creation is before its deadline and never after itself, and the
// other checks do not depend on the time.
func admitCampaign(env []byte, value any) (uint64, recon.ID, bool) {
	v, ok := value.(*protocol.VerifiedCampaign)
	if !ok || v.Digest == ([32]byte{}) || !bytes.Equal(v.Envelope, env) {
		return 0, recon.ID{}, false
	}
	return campaignOrderKey(v), v.Digest, true
}

// admitAttestation hands the store the attestation the gossip validator verified
// (protocol.AttestationValueValidator: at its claimed time, the store's own mode) with the
// trust store object it verified under; the store takes it only while it verifies under
// that same object (vstore.Options.AdmitAttestation).
func admitAttestation(env []byte, value any) (*attest.Verified, *attest.TrustStore, bool) {
	a, ok := value.(*protocol.VerifiedAttestation)
	if !ok || a.Verified == nil || !bytes.Equal(a.Verified.Envelope, env) {
		return nil, nil, false
	}
	return a.Verified, a.Trust, true
}

// Store is the node's verified attestation and campaign store.
func (n *Node) Store() *vstore.Store { return n.vstore }

// Syncer is the node's anti-entropy runner over that store.
func (n *Node) Syncer() *syncer.Syncer { return n.syncer }

// importLocalRuns puts the envelopes this node's own runs wrote to HOME/attestations into
// the store (source local). Envelopes already stored cost a hash and a lookup, not a
// verification, so doing it at every start loses no run finished while the daemon was down.
func (n *Node) importLocalRuns() error {
	dir := n.home.AttestationsDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	files, _, err := attest.ReadEnvelopeDir(dir)
	if err != nil {
		return err
	}
	for lo := 0; lo < len(files); lo += 1000 {
		part := files[lo:min(len(files), lo+1000)]
		envs := make([][]byte, len(part))
		for i, f := range part {
			envs[i] = f.Data
		}
		res, err := n.vstore.Attestations().Add(envs, vstore.SourceLocal, "")
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.Status == vstore.StatusRefused {
				n.opts.Logf("local attestation %s refused: %s %s", part[i].Name, r.Reason, r.Detail)
			}
		}
	}
	return nil
}
