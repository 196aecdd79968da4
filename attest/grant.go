package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	cid "github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/internal/home"
)

// Grants (docs/bundle-format.md §7): a sealed bundle's data key, encrypted with age to one
// lab's X25519 recipient, in an in-toto statement signed by a node of a lab that holds the
// key. It is an envelope like an attestation, so the attestation set carries it — gossip,
// sync, the store — and it is verified under the trust file as any envelope is; it never
// counts in the ledger. Adding a lab to a network is one more grant: the bundle, and its
// CID, stay as they are.

// PredicateGrantV1 marks a grant statement (GrantPredicate).
const PredicateGrantV1 = "https://evalmesh.dev/grant/v1"

// maxWrappedKey bounds the age ciphertext of a data key in a grant (it is about 200 bytes).
const maxWrappedKey = 4096

// GrantPredicate is a grant's predicate.
type GrantPredicate struct {
	// Bundle is the sealed bundle's CID.
	Bundle string `json:"bundle"`
	// Lab is the lab ID the key is granted to, Recipient its age recipient (age1…).
	Lab       string `json:"lab"`
	Recipient string `json:"recipient"`
	// Key is the bundle's data key (its AGE-SECRET-KEY-1… text) encrypted with age to
	// Recipient, base64 (standard, padded).
	Key string `json:"key"`
	// Node and GrantedBy are the signing node and its lab (they must be the signer's).
	Node      string    `json:"node"`
	GrantedBy string    `json:"granted_by"`
	Time      time.Time `json:"time"`
}

func (g *GrantPredicate) validate() error {
	switch {
	case g.Bundle == "":
		return errors.New("bundle (the sealed bundle's CID) is missing")
	case !strings.HasPrefix(g.Lab, "lab:"):
		return fmt.Errorf("lab %q is not a lab ID (lab:…)", g.Lab)
	case g.Node == "" || g.GrantedBy == "":
		return errors.New("node and granted_by (the signer) are required")
	case g.Time.IsZero():
		return errors.New("time is required")
	case len(g.Key) == 0 || len(g.Key) > maxWrappedKey:
		return fmt.Errorf("key is %d bytes of base64; want 1..%d", len(g.Key), maxWrappedKey)
	}
	if _, err := bundleDigest(g.Bundle); err != nil {
		return err
	}
	if _, err := age.ParseX25519Recipient(g.Recipient); err != nil {
		return fmt.Errorf("recipient %q: %v", g.Recipient, err)
	}
	if _, err := base64.StdEncoding.DecodeString(g.Key); err != nil {
		return fmt.Errorf("key is not base64: %v", err)
	}
	return nil
}

// bundleDigest is the sha256 a grant's subject carries: the digest inside the bundle CID
// (the sha256 of the bundle's root block), so the subject names the bundle's bytes.
func bundleDigest(bundle string) (string, error) {
	c, err := cid.Decode(bundle)
	if err != nil {
		return "", fmt.Errorf("bundle %q is not a CID: %v", bundle, err)
	}
	d, err := mh.Decode(c.Hash())
	if err != nil || d.Code != mh.SHA2_256 || len(d.Digest) != 32 {
		return "", fmt.Errorf("bundle %s is not a sha2-256 CID", bundle)
	}
	return hex.EncodeToString(d.Digest), nil
}

// DecodeGrant parses a grant statement (the payload of a grant envelope) and checks its
// predicate and that its one subject is the bundle it names. A decoder of outside input:
// every failure is an error.
func DecodeGrant(payload []byte) (*GrantPredicate, error) {
	st, err := ParseStatement(payload)
	if err != nil {
		return nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	if st.PredicateType != PredicateGrantV1 {
		return nil, refuse(ReasonMalformedPredicate, "predicate type %q is not a grant (%s)", st.PredicateType, PredicateGrantV1)
	}
	return decodeGrantPredicate(st)
}

func decodeGrantPredicate(st *Statement) (*GrantPredicate, error) {
	var g GrantPredicate
	if len(st.Predicate) == 0 {
		return nil, refuse(ReasonMalformedPredicate, "grant predicate is missing")
	}
	if err := strictUnmarshal(st.Predicate, &g, false); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "grant predicate: %v", err)
	}
	if err := g.validate(); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "grant predicate: %v", err)
	}
	d, _ := bundleDigest(g.Bundle)
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != d {
		return nil, refuse(ReasonMalformedPredicate, "grant for %s must have the bundle as its one subject (sha256 %s)", g.Bundle, d)
	}
	return &g, nil
}

// NewGrant wraps dataKey (a bundle's data key, AGE-SECRET-KEY-1…) to the lab labID's age
// recipient and signs the grant with the node key under its lab certificate.
func NewGrant(key crypto.PrivKey, cert *NodeCert, bundle, labID, recipient, dataKey string, now time.Time) (envelope []byte, id string, err error) {
	if cert == nil {
		return nil, "", errors.New("grant: this node has no lab certificate: only a certified node of a lab that holds the key can grant it")
	}
	r, err := age.ParseX25519Recipient(recipient)
	if err != nil {
		return nil, "", fmt.Errorf("grant: lab %s's recipient %q: %v (the trust file's age_recipient)", labID, recipient, err)
	}
	var ct bytes.Buffer
	w, err := age.Encrypt(&ct, r)
	if err != nil {
		return nil, "", err
	}
	if _, err := io.WriteString(w, dataKey); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	node, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	d, err := bundleDigest(bundle)
	if err != nil {
		return nil, "", err
	}
	pred := GrantPredicate{
		Bundle: bundle, Lab: labID, Recipient: recipient, Key: base64.StdEncoding.EncodeToString(ct.Bytes()),
		Node: node.String(), GrantedBy: cert.Lab, Time: now.UTC().Truncate(time.Second),
	}
	if err := pred.validate(); err != nil {
		return nil, "", fmt.Errorf("grant: %w", err)
	}
	sub := Subject{Name: bundle, Digest: map[string]string{"sha256": d}, Annotations: map[string]any{AnnotationCID: bundle, AnnotationRole: "bundle"}}
	stmt, err := NewStatement([]Subject{sub}, PredicateGrantV1, pred)
	if err != nil {
		return nil, "", err
	}
	return Sign(key, cert, stmt)
}

// OpenGrant decrypts the data key in g with the lab's age identity.
func OpenGrant(g *GrantPredicate, id *age.X25519Identity) (string, error) {
	ct, err := base64.StdEncoding.DecodeString(g.Key)
	if err != nil {
		return "", err
	}
	r, err := age.Decrypt(bytes.NewReader(ct), id)
	if err != nil {
		return "", fmt.Errorf("grant of %s to %s does not open with this lab's age identity (%s): %v", g.Bundle, g.Lab, id.Recipient(), err)
	}
	b, err := io.ReadAll(io.LimitReader(r, 256))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// GrantOf reads the grant predicate of a grant envelope without checking its signature
// (a listing; verification is Verify's). ok is false for an envelope that is no grant.
func GrantOf(env []byte) (g *GrantPredicate, ok bool, err error) {
	e, err := DecodeEnvelope(env)
	if err != nil {
		return nil, false, err
	}
	st, err := ParseStatement(e.Payload)
	if err != nil || st.PredicateType != PredicateGrantV1 {
		return nil, false, err
	}
	g, err = decodeGrantPredicate(st)
	return g, err == nil, err
}

// LabAgeKeyFile is a lab's age identity in its lab directory, copied to each of its nodes
// under the same name (home.Home.LabAgeKeyPath): the nodes decrypt grants with it. It is not
// the lab's signing key (which stays off the nodes).
const LabAgeKeyFile = home.LabAgeKeyFile

// LoadAgeIdentity reads an age X25519 identity file (age-keygen's format: comments, then
// one AGE-SECRET-KEY-1… line).
func LoadAgeIdentity(path string) (*age.X25519Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lab age identity: %w (copy the lab's %s there)", err, LabAgeKeyFile)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("lab age identity %s: %w", path, err)
	}
	for _, id := range ids {
		if x, ok := id.(*age.X25519Identity); ok {
			return x, nil
		}
	}
	return nil, fmt.Errorf("lab age identity %s holds no X25519 identity", path)
}

// WriteAgeIdentity creates an age identity file at path (0600, never overwriting one).
func WriteAgeIdentity(path string, id *age.X25519Identity) error {
	body := fmt.Sprintf("# evalmesh lab age identity (docs/trust-format.md)\n# public key: %s\n%s\n", id.Recipient(), id)
	return home.WriteFileExclusive(path, []byte(body), 0o600)
}
