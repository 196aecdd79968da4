package attest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/age"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
	"go.yaml.in/yaml/v3"

	"github.com/evalmesh/evalmesh/internal/home"
)

// TrustFileVersion is the only trust-file version this code reads.
const TrustFileVersion = 1

// trustFile is the YAML shape of a trust file (docs/trust-format.md).
type trustFile struct {
	Version     int              `yaml:"version"`
	Labs        []TrustedLab     `yaml:"labs"`
	Nodes       []TrustedNode    `yaml:"nodes,omitempty"`
	Revocations []map[string]any `yaml:"revocations,omitempty"`
}

// TrustedLab is a lab whose certified nodes are believed.
type TrustedLab struct {
	Name string `yaml:"name" json:"name"`
	// Key is the base64 raw 32-byte ed25519 lab public key.
	Key string `yaml:"key" json:"key"`
	// ID, when given, must equal LabID(Key): a typo in either is caught.
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
	// AgeRecipient is the lab's age X25519 recipient (age1…): sealed bundles' data keys are
	// granted to it (grant.go). Optional; a lab without one is granted nothing.
	AgeRecipient string `yaml:"age_recipient,omitempty" json:"age_recipient,omitempty"`
}

// TrustedNode is a node believed directly, without a lab certificate.
type TrustedNode struct {
	Name   string `yaml:"name" json:"name"`
	PeerID string `yaml:"peer_id,omitempty" json:"peer_id,omitempty"`
	// Key is the base64 raw 32-byte ed25519 node key; either PeerID or Key (or both, agreeing).
	Key string `yaml:"key,omitempty" json:"key,omitempty"`
}

// TrustStore is a parsed trust file: lab keys, directly trusted node keys, revocations.
// Reading (Verify) is safe for concurrent use, and so is AddRevocation: a revocation reaches
// a running daemon whose goroutines verify under the store (node/mesh/revoke.go). The other
// Add methods are not, so build the store, then share it.
type TrustStore struct {
	file  trustFile
	labs  map[string]labEntry          // by lab ID
	nodes map[string]ed25519.PublicKey // by peer ID
	// nodeKeyIDs maps KeyIDOf(node key) to the peer ID: a hint to find a directly trusted
	// key, never an identity of its own.
	nodeKeyIDs map[string]string
	// revoked maps (lab, node or cert ID) to the earliest effective time. Copied on write
	// under revMu and swapped whole, so verifiers read it without a lock while a revocation
	// is added.
	revoked atomic.Pointer[map[revKey]time.Time]
	revMu   sync.Mutex
	revs    []*Revocation

	certs *readMostly[*NodeCert]              // sha256 of a cert envelope's bytes -> checked cert
	keys  *readMostly[*voi.ExpandedPublicKey] // raw key -> precomputed verification key
}

type labEntry struct {
	name      string
	pub       ed25519.PublicKey
	recipient string
	// retired, when set, is when the lab left the network (protocol's network document):
	// its certificates vouch for nothing at or after it.
	retired time.Time
}

type revKey struct{ lab, subject string }

// Cache sizes: a federation has tens of labs and hundreds of nodes; these hold them all.
const (
	certCacheSize = 4096
	keyCacheSize  = 4096
)

// NewTrustStore returns an empty store (add labs and nodes to it).
func NewTrustStore() *TrustStore {
	t, _ := build(trustFile{Version: TrustFileVersion})
	return t
}

// LoadTrust reads and parses a trust file.
func LoadTrust(path string) (*TrustStore, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trust file: %w", err)
	}
	t, err := ParseTrust(b)
	if err != nil {
		return nil, fmt.Errorf("trust file %s: %w", path, err)
	}
	return t, nil
}

// ParseTrust parses trust-file YAML. Unknown fields are an error naming the field.
func ParseTrust(b []byte) (*TrustStore, error) {
	var f trustFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if f.Version != TrustFileVersion {
		return nil, fmt.Errorf("version is %d; this evalmesh reads version %d (start the file with `version: 1`)", f.Version, TrustFileVersion)
	}
	return build(f)
}

func build(f trustFile) (*TrustStore, error) {
	t := &TrustStore{
		file:       f,
		labs:       map[string]labEntry{},
		nodes:      map[string]ed25519.PublicKey{},
		nodeKeyIDs: map[string]string{},
	}
	t.revoked.Store(&map[revKey]time.Time{})
	t.certs = &readMostly[*NodeCert]{limit: certCacheSize}
	t.keys = &readMostly[*voi.ExpandedPublicKey]{limit: keyCacheSize}
	for i, l := range f.Labs {
		pub, err := decodeEd25519Pub(l.Key)
		if err != nil {
			return nil, fmt.Errorf("labs[%d] (%q): %w", i, l.Name, err)
		}
		id := LabID(pub)
		if l.ID != "" && l.ID != id {
			return nil, fmt.Errorf("labs[%d] (%q): id %s does not match its key, whose lab ID is %s", i, l.Name, l.ID, id)
		}
		if l.AgeRecipient != "" {
			if _, err := age.ParseX25519Recipient(l.AgeRecipient); err != nil {
				return nil, fmt.Errorf("labs[%d] (%q): age_recipient %q: %v (want the age1… line of the lab's %s)", i, l.Name, l.AgeRecipient, err, LabAgeKeyFile)
			}
		}
		t.labs[id] = labEntry{name: l.Name, pub: pub, recipient: l.AgeRecipient}
	}
	for i, n := range f.Nodes {
		id, err := trustedNodeID(n)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d] (%q): %w", i, n.Name, err)
		}
		t.nodes[id], _ = nodePubKey(id) // checked by trustedNodeID
		t.nodeKeyIDs[KeyIDOf(t.nodes[id])] = id
	}
	for i, rv := range f.Revocations {
		raw, err := json.Marshal(rv)
		if err != nil {
			return nil, fmt.Errorf("revocations[%d]: %w", i, err)
		}
		r, err := ParseRevocation(raw)
		if err != nil {
			return nil, fmt.Errorf("revocations[%d]: %w", i, err)
		}
		t.addRevocation(r)
	}
	return t, nil
}

func trustedNodeID(n TrustedNode) (string, error) {
	if n.PeerID == "" && n.Key == "" {
		return "", errors.New("give peer_id or key")
	}
	var fromKey string
	if n.Key != "" {
		pub, err := decodeEd25519Pub(n.Key)
		if err != nil {
			return "", err
		}
		fromKey, err = peerIDFromEd25519(pub)
		if err != nil {
			return "", err
		}
	}
	if n.PeerID != "" {
		if _, err := nodePubKey(n.PeerID); err != nil {
			return "", err
		}
		if fromKey != "" && fromKey != n.PeerID {
			return "", fmt.Errorf("peer_id %s does not match key (peer ID %s)", n.PeerID, fromKey)
		}
		return n.PeerID, nil
	}
	return fromKey, nil
}

// addRevocation records r; the caller holds revMu (or owns the store alone).
func (t *TrustStore) addRevocation(r *Revocation) {
	t.revs = append(t.revs, r)
	revoked := maps.Clone(*t.revoked.Load())
	for _, s := range slices.Concat(r.Nodes, r.Certs) {
		k := revKey{r.Lab, s}
		if old, ok := revoked[k]; !ok || r.Time.Before(old) {
			revoked[k] = r.Time
		}
	}
	t.revoked.Store(&revoked)
}

// revokedAt is when lab revoked subject (a node's peer ID or a certificate ID), if it did.
func (t *TrustStore) revokedAt(lab, subject string) (time.Time, bool) {
	at, ok := (*t.revoked.Load())[revKey{lab, subject}]
	return at, ok
}

// AddLab trusts a lab key under name. Adding a key already present renames it.
func (t *TrustStore) AddLab(name string, pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("lab key is %d bytes, want 32", len(pub))
	}
	id := LabID(pub)
	entry := TrustedLab{Name: name, Key: base64.StdEncoding.EncodeToString(pub), ID: id}
	i := slices.IndexFunc(t.file.Labs, func(l TrustedLab) bool { return l.Key == entry.Key })
	if i >= 0 {
		entry.AgeRecipient = t.file.Labs[i].AgeRecipient
		t.file.Labs[i] = entry
	} else {
		t.file.Labs = append(t.file.Labs, entry)
	}
	t.labs[id] = labEntry{name: name, pub: pub, recipient: entry.AgeRecipient}
	return id, nil
}

// SetAgeRecipient records the age recipient (age1…) of the trusted lab labID.
func (t *TrustStore) SetAgeRecipient(labID, recipient string) error {
	e, ok := t.labs[labID]
	if !ok {
		return fmt.Errorf("lab %s is not in the trust store; add it first", labID)
	}
	if _, err := age.ParseX25519Recipient(recipient); err != nil {
		return fmt.Errorf("age recipient %q: %v", recipient, err)
	}
	e.recipient = recipient
	t.labs[labID] = e
	for i := range t.file.Labs {
		if t.file.Labs[i].ID == labID || (t.file.Labs[i].ID == "" && t.file.Labs[i].Key == base64.StdEncoding.EncodeToString(e.pub)) {
			t.file.Labs[i].AgeRecipient = recipient
		}
	}
	return nil
}

// RetireLab records that the trusted lab labID retired at: what its nodes signed claiming
// an earlier time still counts (AtClaimedTime); nothing it signs at or after it does, and
// live messages (at now) from its nodes are refused once now reaches it. The zero time
// clears it; unknown labs are ignored.
func (t *TrustStore) RetireLab(labID string, at time.Time) {
	if e, ok := t.labs[labID]; ok {
		e.retired = at
		t.labs[labID] = e
	}
}

// LabRetired is when the trusted lab labID retired, if it did.
func (t *TrustStore) LabRetired(labID string) (time.Time, bool) {
	e := t.labs[labID]
	return e.retired, !e.retired.IsZero()
}

// LabRecipient is the age recipient of the trusted lab labID ("" when it lists none).
func (t *TrustStore) LabRecipient(labID string) string { return t.labs[labID].recipient }

// LabRecipients maps every trusted lab that lists an age recipient to it, except the labs
// retired from the network (RetireLab): those are granted no new bundle keys.
func (t *TrustStore) LabRecipients() map[string]string {
	out := map[string]string{}
	for id, e := range t.labs {
		if e.recipient != "" && e.retired.IsZero() {
			out[id] = e.recipient
		}
	}
	return out
}

// LabByName finds a trusted lab by its name or its ID.
func (t *TrustStore) LabByName(name string) (string, bool) {
	if _, ok := t.labs[name]; ok {
		return name, true
	}
	for id, e := range t.labs {
		if e.name == name {
			return id, true
		}
	}
	return "", false
}

// AddNode trusts a node key directly (no certificate needed).
func (t *TrustStore) AddNode(name string, pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("node key is %d bytes, want 32", len(pub))
	}
	id, err := peerIDFromEd25519(pub)
	if err != nil {
		return "", err
	}
	n := TrustedNode{Name: name, PeerID: id, Key: base64.StdEncoding.EncodeToString(pub)}
	i := slices.IndexFunc(t.file.Nodes, func(x TrustedNode) bool { return x.PeerID == id })
	if i >= 0 {
		t.file.Nodes[i] = n
	} else {
		t.file.Nodes = append(t.file.Nodes, n)
	}
	t.nodes[id] = slices.Clone(pub)
	t.nodeKeyIDs[KeyIDOf(pub)] = id
	return id, nil
}

// AddRevocation records a verified revocation (its lab need not be trusted: it only ever
// takes trust away). Safe while others verify under the store.
func (t *TrustStore) AddRevocation(r *Revocation) error {
	_, err := t.addNewRevocation(r)
	return err
}

// AddNewRevocation is AddRevocation, reporting whether r was new to the store (false: one
// with its ID was already held).
func (t *TrustStore) AddNewRevocation(r *Revocation) (bool, error) { return t.addNewRevocation(r) }

func (t *TrustStore) addNewRevocation(r *Revocation) (bool, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Raw(), &m); err != nil {
		return false, err
	}
	t.revMu.Lock()
	defer t.revMu.Unlock()
	for _, old := range t.revs {
		if old.ID == r.ID {
			return false, nil
		}
	}
	t.file.Revocations = append(t.file.Revocations, m)
	t.addRevocation(r)
	// Certificates checked before the revocation may now be revoked: they are re-checked
	// on every use against t.revoked, so the cache stays valid.
	return true, nil
}

// Labs lists the trusted labs.
func (t *TrustStore) Labs() []TrustedLab { return slices.Clone(t.file.Labs) }

// LabIDs is the IDs of the trusted labs, sorted, each once (a lab listed by key alone
// counts under the ID of its key).
func (t *TrustStore) LabIDs() []string {
	var out []string
	for _, l := range t.file.Labs {
		id := l.ID
		if id == "" {
			if pub, err := DecodeBase64(l.Key); err == nil && len(pub) == 32 {
				id = LabID(pub)
			}
		}
		if id != "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Nodes lists the directly trusted nodes.
func (t *TrustStore) Nodes() []TrustedNode { return slices.Clone(t.file.Nodes) }

// Revocations lists the revocations the store holds.
func (t *TrustStore) Revocations() []*Revocation {
	t.revMu.Lock()
	defer t.revMu.Unlock()
	return slices.Clone(t.revs)
}

// LabName returns the name a lab ID is trusted under, and whether it is trusted.
func (t *TrustStore) LabName(id string) (string, bool) {
	e, ok := t.labs[id]
	return e.name, ok
}

const trustHeader = `# evalmesh trust file (docs/trust-format.md). An attestation is believed when its node
# certificate is signed by a lab listed here (and is in its validity window and not revoked),
# or when its signer is listed under nodes.
`

// Marshal writes the store as trust-file YAML.
func (t *TrustStore) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(trustHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(t.file); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Save writes the store to path atomically.
func (t *TrustStore) Save(path string) error {
	b, err := t.Marshal()
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(path, b, 0o644)
}

// readMostly is a bounded cache for the few certificates and keys a federation has: every
// envelope reads it, almost none writes it, so reads must not contend between cores (an LRU's
// mutex would). When full it starts over, which only costs re-verification.
type readMostly[V any] struct {
	m     sync.Map // [32]byte -> V
	n     atomic.Int64
	limit int64
}

func (c *readMostly[V]) Get(k [32]byte) (V, bool) {
	v, ok := c.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (c *readMostly[V]) Add(k [32]byte, v V) {
	if c.n.Load() >= c.limit {
		c.m.Clear()
		c.n.Store(0)
	}
	if _, loaded := c.m.LoadOrStore(k, v); !loaded {
		c.n.Add(1)
	}
}
