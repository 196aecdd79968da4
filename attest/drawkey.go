package attest

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// Lab draw keys (docs/attestation-format.md "Draw keys", docs/design.md §9 "Choosing who
// judges a run"). A node's own key draws only one value per run, but a lab certifies as
// many nodes as it likes: drawing with node keys, a lab of k nodes re-scores or audits from
// the node whose draw is lowest and is drawn with probability 1 − (1 − r/m)^k, not r/m.
// Where the network document names a lab's draw key (an ed25519 key, as an ECVRF key,
// distinct from its lab key; every node of the lab holds its private half), a draw of that
// lab counts only under that key, so the lab has one draw per run however many nodes it
// runs. A lab the document names no draw key for draws with its nodes' keys, as before.

// DrawKeys are the draw keys a network document names: lab ID → ed25519 public key. A
// lab that is absent draws with its nodes' keys.
type DrawKeys map[string]ed25519.PublicKey

// ParseDrawKey reads a draw key as the network document writes it: base64 of the 32-byte
// ed25519 public key.
func ParseDrawKey(s string) (ed25519.PublicKey, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("draw key %q is not a base64 ed25519 public key (32 bytes): write it with `evalmesh network draw-key`", s)
	}
	return ed25519.PublicKey(k), nil
}

// Named is lab's draw key, base64, or "" where the document names none.
func (k DrawKeys) Named(lab string) string {
	if pub, ok := k[lab]; ok {
		return base64.StdEncoding.EncodeToString(pub)
	}
	return ""
}

// verify checks the hex VRF proof over alpha as a draw of lab's signing node: under lab's
// draw key where the document names one (the node's own key draws nothing there), else
// under node's key. It returns the VRF output.
func (k DrawKeys) verify(lab, node, proofHex string, alpha []byte) ([]byte, error) {
	pub, ok := k[lab]
	if !ok {
		return vrfVerify(node, proofHex, alpha)
	}
	beta, err := vrfVerifyKey(pub, proofHex, alpha)
	if err != nil {
		return nil, fmt.Errorf("not under lab %s's draw key %s, which the network document names: a lab draws once per run, with that key, from whichever node (%w)", lab, k.Named(lab), err)
	}
	return beta, nil
}

// DrawKeyString is the public half of a draw key as the network document names it.
func DrawKeyString(key crypto.PrivKey) (string, error) {
	if key.Type() != crypto.Ed25519 {
		return "", fmt.Errorf("a draw key is ed25519, not %s", key.Type())
	}
	raw, err := key.GetPublic().Raw()
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}
