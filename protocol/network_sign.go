package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// A network document takes effect once more than half of its labs that have not retired
// have signed its canonical form (docs/protocol-sync.md §6). The signatures travel in the
// document file beside the fields they sign, outside the canonical form and the hash.

// SignedBytes is what a lab signs: the DSSE pre-authentication encoding of the canonical
// form under NetworkPayloadType.
func (d *NetworkDoc) SignedBytes() []byte { return attest.PAE(NetworkPayloadType, d.Canonical()) }

// Lab finds a lab of the document by name.
func (d *NetworkDoc) Lab(name string) (*NetworkLab, bool) {
	for i := range d.Labs {
		if d.Labs[i].Name == name {
			return &d.Labs[i], true
		}
	}
	return nil, false
}

// Sign adds lab's signature under the document's lab name. The lab's key must be that
// name's key in the document; a signature by the same lab replaces its earlier one.
func (d *NetworkDoc) Sign(name string, lab *attest.Lab) error {
	l, ok := d.Lab(name)
	if !ok {
		return fmt.Errorf("lab %q is not in network document %q (its labs: %s)", name, d.Network, strings.Join(d.labNames(), ", "))
	}
	if l.Key != base64.StdEncoding.EncodeToString(lab.Pub) {
		return fmt.Errorf("the key of lab directory %s is not lab %q's key in the document", lab.ID, name)
	}
	sig, err := lab.Key.Sign(d.SignedBytes())
	if err != nil {
		return err
	}
	d.Signatures = slices.DeleteFunc(slices.Clone(d.Signatures), func(s NetworkSignature) bool { return s.Lab == name })
	d.Signatures = append(d.Signatures, NetworkSignature{Lab: name, Sig: base64.StdEncoding.EncodeToString(sig)})
	slices.SortFunc(d.Signatures, func(a, b NetworkSignature) int { return strings.Compare(a.Lab, b.Lab) })
	return nil
}

func (d *NetworkDoc) labNames() []string {
	var out []string
	for _, l := range d.Labs {
		out = append(out, l.Name)
	}
	return out
}

// SignatureReport says who signed a document and whether that is a majority.
type SignatureReport struct {
	// Signers are the active (not retired) labs with a valid signature, by name, sorted.
	Signers []string `json:"signers"`
	// Missing are the active labs without a valid signature.
	Missing []string `json:"missing"`
	// Needed is how many active labs must sign: more than half of them.
	Needed int `json:"needed"`
	// Majority is len(Signers) >= Needed (and at least one lab signs).
	Majority bool `json:"majority"`
	// Ignored names each signature that does not count and why: a lab not in the document
	// or retired, a second signature of one lab, a signature that does not verify (made
	// over another version of the document, or by another key).
	Ignored []string `json:"ignored"`
}

// Signatures verifies the document's signatures against its labs' keys.
func (d *NetworkDoc) SignatureReport() SignatureReport {
	r := SignatureReport{Signers: []string{}, Missing: []string{}, Ignored: []string{}}
	msg := d.SignedBytes()
	signed := map[string]bool{}
	for i, s := range d.Signatures {
		l, ok := d.Lab(s.Lab)
		switch {
		case !ok:
			r.Ignored = append(r.Ignored, fmt.Sprintf("signature %d: lab %q is not in the document", i+1, s.Lab))
			continue
		case l.Retired != nil:
			r.Ignored = append(r.Ignored, fmt.Sprintf("signature %d: lab %q retired at %s", i+1, s.Lab, l.Retired.Format(time.RFC3339)))
			continue
		case signed[s.Lab]:
			r.Ignored = append(r.Ignored, fmt.Sprintf("signature %d: lab %q signed already", i+1, s.Lab))
			continue
		}
		pub, _ := base64.StdEncoding.DecodeString(l.Key)
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, msg, sig) {
			r.Ignored = append(r.Ignored, fmt.Sprintf("signature %d: lab %q's signature does not verify over this document (signed before a change? sign again)", i+1, s.Lab))
			continue
		}
		signed[s.Lab] = true
	}
	active := 0
	for _, l := range d.Labs {
		if l.Retired != nil {
			continue
		}
		active++
		if signed[l.Name] {
			r.Signers = append(r.Signers, l.Name)
		} else {
			r.Missing = append(r.Missing, l.Name)
		}
	}
	r.Needed = active/2 + 1
	r.Majority = active > 0 && len(r.Signers) >= r.Needed
	return r
}

// SignedByMajority is whether more than half of the document's active labs signed it, and
// who did (bad, duplicate and unknown signatures are ignored: SignatureReport says which).
func (d *NetworkDoc) SignedByMajority() (signers []string, ok bool) {
	r := d.SignatureReport()
	return r.Signers, r.Majority
}

// AddLab adds a lab to the document and clears its signatures (the document changed).
func (d *NetworkDoc) AddLab(l NetworkLab) error {
	if _, ok := d.Lab(l.Name); ok {
		return fmt.Errorf("network document %q already has a lab named %q", d.Network, l.Name)
	}
	for _, o := range d.Labs {
		if o.Key == l.Key {
			return fmt.Errorf("network document %q already has this key, as lab %q", d.Network, o.Name)
		}
	}
	n := *d
	n.Labs = append(slices.Clone(d.Labs), l)
	return d.apply(n)
}

// apply makes n, an edit of d holding labs of its own, the document, normalized, with the
// signatures cleared; an invalid n leaves d as it was.
func (d *NetworkDoc) apply(n NetworkDoc) error {
	n.Ledger.Executors = slices.Clone(d.Ledger.Executors)
	n.Ledger.Pardons = slices.Clone(d.Ledger.Pardons)
	if err := n.normalize(); err != nil {
		return err
	}
	*d = n
	d.clearSignatures()
	return nil
}

// RetireLab marks lab name retired at (UTC, whole seconds) and clears the signatures.
func (d *NetworkDoc) RetireLab(name string, at time.Time) error {
	l, ok := d.Lab(name)
	if !ok {
		return fmt.Errorf("lab %q is not in network document %q (its labs: %s)", name, d.Network, strings.Join(d.labNames(), ", "))
	}
	if l.Retired != nil {
		return fmt.Errorf("lab %q retired already, at %s", name, l.Retired.Format(time.RFC3339))
	}
	if at.IsZero() {
		return fmt.Errorf("retire lab %q: no time given", name)
	}
	t := at.UTC().Truncate(time.Second)
	if t.Year() < 1 || t.Year() > 9999 {
		return fmt.Errorf("retire lab %q: %s is outside years 1 to 9999", name, at)
	}
	l.Retired = &t
	d.clearSignatures()
	return nil
}

// SetDrawKey names key (base64 ed25519 public key) as lab name's draw key and clears the
// signatures; "" removes it (the lab's nodes draw with their own keys again).
func (d *NetworkDoc) SetDrawKey(name, key string) error {
	l, ok := d.Lab(name)
	if !ok {
		return fmt.Errorf("lab %q is not in network document %q (its labs: %s)", name, d.Network, strings.Join(d.labNames(), ", "))
	}
	n := *d
	n.Labs = slices.Clone(d.Labs)
	for i := range n.Labs {
		if n.Labs[i].Name == l.Name {
			n.Labs[i].DrawKey = key
		}
	}
	return d.apply(n)
}

// AddRevocation adds a lab's signed revocation (`evalmesh lab revoke`) and clears the
// signatures. The revocation must be by a lab of the document; one already held is an error
// naming it.
func (d *NetworkDoc) AddRevocation(raw []byte) error {
	r, err := attest.ParseRevocation(raw)
	if err != nil {
		return err
	}
	for _, old := range d.Revocations {
		if o, err := attest.ParseRevocation(old); err == nil && o.ID == r.ID {
			return fmt.Errorf("network document %q holds revocation %s already", d.Network, r.ID)
		}
	}
	d.Revocations = append(d.Revocations, slices.Clone(raw))
	if err := d.normalizeRevocations(); err != nil {
		d.Revocations = d.Revocations[:len(d.Revocations)-1]
		return err
	}
	d.clearSignatures()
	return nil
}

// clearSignatures drops every signature, keeping the field (an edited document is one
// that must be signed again).
func (d *NetworkDoc) clearSignatures() { d.Signatures = []NetworkSignature{} }
