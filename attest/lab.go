package attest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"filippo.io/age"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/home"
)

// Payload types of the lab-signed objects; each is a DSSE envelope of its own, so a lab
// signature is checked over the bytes as received, like an attestation's.
const (
	CertPayloadType       = "application/vnd.evalmesh.node-cert+json"
	RevocationPayloadType = "application/vnd.evalmesh.revocation+json"
	CertTypeV1            = "https://evalmesh.dev/node-cert/v1"
	RevocationTypeV1      = "https://evalmesh.dev/revocation/v1"
	// LabIDPrefix starts every lab ID: "lab:" + base32(lowercase, unpadded) of the sha256 of
	// the raw 32-byte ed25519 lab public key.
	LabIDPrefix = "lab:"
	// DefaultCertValidity is how long `lab certify` certifies a node for unless told.
	DefaultCertValidity = 90 * 24 * time.Hour
	// LabKeyFile and LabInfoFile are the files in a lab directory.
	LabKeyFile  = "lab.key"
	LabInfoFile = "lab.json"
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// LabID derives a lab's ID from its public key.
func LabID(pub ed25519.PublicKey) string {
	d := sha256.Sum256(pub)
	return LabIDPrefix + strings.ToLower(b32.EncodeToString(d[:]))
}

// Lab is a lab's signing key.
type Lab struct {
	Key crypto.PrivKey
	Pub ed25519.PublicKey
	ID  string
}

// LabInfo is the public half of a lab directory (lab.json), what others put in trust files.
type LabInfo struct {
	ID        string `json:"lab_id"`
	PublicKey string `json:"public_key"` // base64 of the raw 32-byte ed25519 key
	Name      string `json:"name,omitempty"`
	// AgeRecipient is the public half of the lab's age identity (LABDIR/lab-age.key, which
	// its nodes hold to open grants of sealed bundles).
	AgeRecipient string `json:"age_recipient,omitempty"`
}

// InitLab creates a lab key in dir (lab.key mode 0600, lab.json). It refuses to overwrite
// an existing key; a key left without lab.json (a crash mid-init) gets its lab.json.
func InitLab(dir, name string) (*Lab, error) {
	keyPath := filepath.Join(dir, LabKeyFile)
	if _, err := os.Stat(keyPath); err == nil {
		// A crash between writing the key and lab.json leaves a key without its public
		// half: finish that init (the key is kept) rather than strand the lab.
		if _, err := os.Stat(filepath.Join(dir, LabInfoFile)); errors.Is(err, fs.ErrNotExist) {
			lab, err := LoadLab(dir)
			if err != nil {
				return nil, err
			}
			return lab, lab.writeInfo(dir, name)
		}
		return nil, fmt.Errorf("lab key %s already exists; pick another --dir or remove it yourself", keyPath)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create lab dir: %w", err)
	}
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	raw, err := crypto.MarshalPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	// Exclusive: fails if another init raced us; a crash leaves no torn key.
	if err := home.WriteFileExclusive(keyPath, raw, 0o600); err != nil {
		return nil, fmt.Errorf("write lab key: %w", err)
	}
	lab, err := labFromKey(priv)
	if err != nil {
		return nil, err
	}
	return lab, lab.writeInfo(dir, name)
}

func (l *Lab) writeInfo(dir, name string) error {
	li := l.Info(name)
	agePath := filepath.Join(dir, LabAgeKeyFile)
	if _, err := os.Stat(agePath); errors.Is(err, fs.ErrNotExist) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return err
		}
		if err := WriteAgeIdentity(agePath, id); err != nil {
			return fmt.Errorf("write lab age identity: %w", err)
		}
	}
	id, err := LoadAgeIdentity(agePath)
	if err != nil {
		return err
	}
	li.AgeRecipient = id.Recipient().String()
	info, _ := json.MarshalIndent(li, "", "  ")
	return home.WriteFileAtomic(filepath.Join(dir, LabInfoFile), append(info, '\n'), 0o644)
}

// LoadLab reads the lab key from dir.
func LoadLab(dir string) (*Lab, error) {
	keyPath := filepath.Join(dir, LabKeyFile)
	raw, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no lab key at %s: run `evalmesh lab init --dir %s` first", keyPath, dir)
	}
	if err != nil {
		return nil, err
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("lab key %s is corrupt: %w", keyPath, err)
	}
	return labFromKey(key)
}

// LoadLabInfo reads the public lab.json of a lab directory (no private key needed), and
// checks that its ID matches its key.
func LoadLabInfo(dir string) (*LabInfo, error) {
	raw, err := os.ReadFile(filepath.Join(dir, LabInfoFile))
	if err != nil {
		return nil, fmt.Errorf("lab directory %s: %w", dir, err)
	}
	var info LabInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, LabInfoFile), err)
	}
	pub, err := decodeEd25519Pub(info.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, LabInfoFile), err)
	}
	if LabID(pub) != info.ID {
		return nil, fmt.Errorf("%s: lab_id %s does not match its public key (%s)", filepath.Join(dir, LabInfoFile), info.ID, LabID(pub))
	}
	return &info, nil
}

// NewLab wraps an ed25519 libp2p key as a lab (tests, embedding).
func NewLab(key crypto.PrivKey) (*Lab, error) { return labFromKey(key) }

func labFromKey(key crypto.PrivKey) (*Lab, error) {
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("lab key type %v, want ed25519", key.Type())
	}
	raw, err := key.GetPublic().Raw()
	if err != nil {
		return nil, err
	}
	pub := ed25519.PublicKey(raw)
	return &Lab{Key: key, Pub: pub, ID: LabID(pub)}, nil
}

// Info returns the lab's public description.
func (l *Lab) Info(name string) LabInfo {
	return LabInfo{ID: l.ID, PublicKey: base64.StdEncoding.EncodeToString(l.Pub), Name: name}
}

func decodeEd25519Pub(s string) (ed25519.PublicKey, error) {
	b, err := DecodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key is %d bytes; want the raw 32-byte ed25519 key in base64", len(b))
	}
	return ed25519.PublicKey(b), nil
}

func peerIDOf(key crypto.PrivKey) (string, error) {
	if key == nil || key.Type() != crypto.Ed25519 {
		return "", errors.New("node key must be ed25519")
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// nodePubKey extracts the ed25519 key embedded in an ed25519 peer ID.
func nodePubKey(node string) (ed25519.PublicKey, error) {
	id, err := peer.Decode(node)
	if err != nil {
		return nil, fmt.Errorf("%q is not a peer ID: %w", node, err)
	}
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("peer ID %s does not embed its key (want an ed25519 peer ID): %w", node, err)
	}
	if pk.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("peer ID %s is not an ed25519 key", node)
	}
	raw, err := pk.Raw()
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(raw), nil
}

// certBody is the signed content of a node certificate.
type certBody struct {
	Type      string    `json:"_type"`
	Lab       string    `json:"lab"`
	LabKey    string    `json:"lab_key"`
	Node      string    `json:"node"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
}

// NodeCert is a lab's statement that a node (peer ID) speaks for it during a validity window.
// On the wire it is a DSSE envelope (payloadType CertPayloadType) signed by the lab key;
// NodeCert keeps those bytes (Raw) so it travels unchanged inside attestations.
type NodeCert struct {
	ID        string // CIDv1 (raw, sha2-256) of the certificate body
	Lab       string // lab ID, derived from LabKey
	LabKey    ed25519.PublicKey
	Node      string // the node's peer ID
	NodeKey   ed25519.PublicKey
	NotBefore time.Time
	NotAfter  time.Time
	raw       []byte
	nodeKeyID string // KeyIDOf(NodeKey): the keyid the node's envelopes carry
}

// Raw returns the certificate's envelope JSON, as signed or received.
func (c *NodeCert) Raw() []byte { return c.raw }

// MarshalJSON writes the certificate envelope unchanged.
func (c *NodeCert) MarshalJSON() ([]byte, error) { return c.raw, nil }

// Certify issues a certificate for node (a peer ID) valid from notBefore for validity.
func (l *Lab) Certify(node string, notBefore time.Time, validity time.Duration) (*NodeCert, error) {
	if _, err := nodePubKey(node); err != nil {
		return nil, err
	}
	if validity <= 0 {
		return nil, fmt.Errorf("validity %s must be positive", validity)
	}
	body, err := json.Marshal(certBody{
		Type: CertTypeV1, Lab: l.ID, LabKey: base64.StdEncoding.EncodeToString(l.Pub), Node: node,
		NotBefore: notBefore.UTC().Truncate(time.Second), NotAfter: notBefore.Add(validity).UTC().Truncate(time.Second),
	})
	if err != nil {
		return nil, err
	}
	env, err := signDSSE(l.Key, CertPayloadType, body, KeyIDOf(l.Pub), nil)
	if err != nil {
		return nil, err
	}
	return ParseNodeCert(env)
}

// ParseNodeCert decodes a certificate envelope and checks its lab signature. Whether the
// lab is trusted, and the validity window, are the trust store's business.
func ParseNodeCert(b []byte) (*NodeCert, error) {
	c, sig, body, err := decodeNodeCert(b)
	if err != nil {
		return nil, err
	}
	if !verifySig(c.LabKey, PAE(CertPayloadType, body), sig) {
		return nil, &VerifyError{Reason: ReasonBadCertSignature, Detail: fmt.Sprintf("certificate for node %s does not carry a valid signature of lab %s", c.Node, c.Lab)}
	}
	return c, nil
}

// decodeNodeCert parses without checking the signature.
func decodeNodeCert(b []byte) (c *NodeCert, sig, body []byte, err error) {
	e, err := DecodeEnvelope(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node certificate: %w", err)
	}
	if e.PayloadType != CertPayloadType {
		return nil, nil, nil, fmt.Errorf("node certificate payloadType is %q, want %q", e.PayloadType, CertPayloadType)
	}
	var cb certBody
	if err := strictUnmarshal(e.Payload, &cb, true); err != nil {
		return nil, nil, nil, fmt.Errorf("node certificate body: %w", err)
	}
	if cb.Type != CertTypeV1 {
		return nil, nil, nil, fmt.Errorf("node certificate _type is %q, want %q", cb.Type, CertTypeV1)
	}
	pub, err := decodeEd25519Pub(cb.LabKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node certificate lab_key: %w", err)
	}
	if LabID(pub) != cb.Lab {
		return nil, nil, nil, fmt.Errorf("node certificate lab %s does not match its lab_key (%s)", cb.Lab, LabID(pub))
	}
	// The keyid is a hint: the lab is the one lab_key names. Certificates before keyids
	// followed go-securesystemslib carry the lab ID; any other keyid is refused so one
	// certificate has one spelling.
	if e.KeyID != "" && e.KeyID != cb.Lab && e.KeyID != KeyIDOf(pub) {
		return nil, nil, nil, fmt.Errorf("node certificate keyid %s is neither its lab %s nor that lab key's keyid %s", e.KeyID, cb.Lab, KeyIDOf(pub))
	}
	nodeKey, err := nodePubKey(cb.Node)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node certificate node: %w", err)
	}
	if !cb.NotAfter.After(cb.NotBefore) {
		return nil, nil, nil, errors.New("node certificate not_after is not after not_before")
	}
	d := sha256.Sum256(e.Payload)
	return &NodeCert{
		ID: idOfDigest(d), Lab: cb.Lab, LabKey: pub, Node: cb.Node, NodeKey: nodeKey, nodeKeyID: KeyIDOf(nodeKey),
		NotBefore: cb.NotBefore, NotAfter: cb.NotAfter, raw: slices.Clone(b),
	}, e.Sig, e.Payload, nil
}

// LoadNodeCert reads a certificate file (as printed by `evalmesh lab certify`).
func LoadNodeCert(path string) (*NodeCert, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	c, err := ParseNodeCert(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// revocationBody is the signed content of a revocation.
type revocationBody struct {
	Type   string    `json:"_type"`
	Lab    string    `json:"lab"`
	LabKey string    `json:"lab_key"`
	Nodes  []string  `json:"nodes,omitempty"`
	Certs  []string  `json:"certs,omitempty"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
}

// Revocation is a lab's signed statement that, from Time on, certificates it issued for
// Nodes (any certificate) or with IDs in Certs no longer speak for it.
type Revocation struct {
	ID     string // CID of the body
	Lab    string
	Nodes  []string
	Certs  []string
	Time   time.Time
	Reason string
	raw    []byte
}

// Raw returns the revocation's envelope JSON.
func (r *Revocation) Raw() []byte { return r.raw }

// MarshalJSON writes the revocation envelope unchanged.
func (r *Revocation) MarshalJSON() ([]byte, error) { return r.raw, nil }

// Revoke signs a revocation of nodes (peer IDs) and/or certificate IDs effective at t.
func (l *Lab) Revoke(nodes, certs []string, t time.Time, reason string) (*Revocation, error) {
	if len(nodes) == 0 && len(certs) == 0 {
		return nil, errors.New("nothing to revoke: name at least one --node or --cert")
	}
	for _, n := range nodes {
		if _, err := peer.Decode(n); err != nil {
			return nil, fmt.Errorf("revoke node %q: not a peer ID", n)
		}
	}
	for _, c := range certs {
		if _, err := cid.Decode(c); err != nil {
			return nil, fmt.Errorf("revoke cert %q: not a certificate ID (CID)", c)
		}
	}
	body, err := json.Marshal(revocationBody{
		Type: RevocationTypeV1, Lab: l.ID, LabKey: base64.StdEncoding.EncodeToString(l.Pub),
		Nodes: nodes, Certs: certs, Time: t.UTC(), Reason: reason,
	})
	if err != nil {
		return nil, err
	}
	env, err := signDSSE(l.Key, RevocationPayloadType, body, KeyIDOf(l.Pub), nil)
	if err != nil {
		return nil, err
	}
	return ParseRevocation(env)
}

// ParseRevocation decodes a revocation envelope and checks the lab's signature over it.
func ParseRevocation(b []byte) (*Revocation, error) {
	e, err := DecodeEnvelope(b)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	if e.PayloadType != RevocationPayloadType {
		return nil, fmt.Errorf("revocation payloadType is %q, want %q", e.PayloadType, RevocationPayloadType)
	}
	var rb revocationBody
	if err := strictUnmarshal(e.Payload, &rb, true); err != nil {
		return nil, fmt.Errorf("revocation body: %w", err)
	}
	if rb.Type != RevocationTypeV1 {
		return nil, fmt.Errorf("revocation _type is %q, want %q", rb.Type, RevocationTypeV1)
	}
	pub, err := decodeEd25519Pub(rb.LabKey)
	if err != nil {
		return nil, fmt.Errorf("revocation lab_key: %w", err)
	}
	if LabID(pub) != rb.Lab {
		return nil, fmt.Errorf("revocation lab %s does not match its lab_key", rb.Lab)
	}
	if !verifySig(pub, PAE(RevocationPayloadType, e.Payload), e.Sig) {
		return nil, fmt.Errorf("revocation does not carry a valid signature of lab %s", rb.Lab)
	}
	d := sha256.Sum256(e.Payload)
	return &Revocation{ID: idOfDigest(d), Lab: rb.Lab, Nodes: rb.Nodes, Certs: rb.Certs, Time: rb.Time, Reason: rb.Reason, raw: slices.Clone(b)}, nil
}
