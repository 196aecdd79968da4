package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
)

// labs[].draw_key: absent keeps a document's hash and each node's own draw; set (by
// SetDrawKey, which clears the signatures) it moves the hash and reaches the ledger's
// re-scorer and audit rules by lab ID; a draw key that is not an ed25519 key, is the lab's
// own key, or another lab's draw key is refused, naming what to do.
func TestNetworkDocDrawKeys(t *testing.T) {
	d, labs := signedTestDoc(t, "a", "b", "c")
	d.Ledger.Replication, d.Ledger.Rescorers, d.Ledger.Audits = 1, RescorersDrawn, &AuditPolicy{}
	before := d.Hash()
	if p := d.AcceptPolicy(); d.DrawKeys() != nil || p.RescorerDraw.Keys != nil || p.Audits.DrawKeys != nil {
		t.Fatal("a document without draw keys names some")
	}
	if err := d.Sign("a", labs["a"]); err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(pub)
	if err := d.SetDrawKey("b", key); err != nil {
		t.Fatal(err)
	}
	if d.Hash() == before || len(d.Signatures) != 0 {
		t.Fatalf("naming a draw key kept the hash (%v) or the signatures (%d)", d.Hash() == before, len(d.Signatures))
	}
	p := d.AcceptPolicy()
	b := attest.LabID(labs["b"].Pub)
	if got := p.RescorerDraw.Keys.Named(b); got != key || p.Audits.DrawKeys.Named(b) != key || len(p.RescorerDraw.Keys) != 1 {
		t.Fatalf("policy keys %v / %v: want lab b's draw key only", p.RescorerDraw.Keys, p.Audits.DrawKeys)
	}
	again, err := ParseNetworkDoc(d.File())
	if err != nil || again.Hash() != d.Hash() {
		t.Fatalf("round trip: %v", err)
	}
	if err := d.SetDrawKey("b", ""); err != nil || d.Hash() != before {
		t.Fatalf("removing the draw key: %v, hash back %v", err, d.Hash() == before)
	}
	for _, c := range []struct{ name, lab, key, want string }{
		{"not a key", "a", "bm90IGEga2V5", "not a base64 ed25519 public key"},
		{"the lab key", "a", base64.StdEncoding.EncodeToString(labs["a"].Pub), "is the lab key"},
		{"unknown lab", "z", key, `lab "z" is not in network document`},
	} {
		if err := d.SetDrawKey(c.lab, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := d.SetDrawKey("a", key); err != nil {
		t.Fatal(err)
	}
	if err := d.SetDrawKey("c", key); err == nil || !strings.Contains(err.Error(), "the same draw_key") {
		t.Errorf("two labs with one draw key: %v", err)
	}
}

// A draw key pasted in another base64 spelling (no padding, the URL alphabet) is the same
// key: it is stored in the standard padded spelling `evalmesh network draw-key` writes, so
// the document's hash is the one that spelling gives, and two labs naming one key in two
// spellings are refused, naming both. A spelling documents could already hold keeps its
// bytes, so no valid document's hash moves.
func TestNetworkDocDrawKeySpellings(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b", "c")
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	std := base64.StdEncoding.EncodeToString(pub)
	if err := d.SetDrawKey("b", std); err != nil {
		t.Fatal(err)
	}
	file, hash := string(d.File()), d.Hash()
	if !strings.Contains(string(d.Canonical()), `"draw_key":"`+std+`"`) {
		t.Fatalf("canonical form does not hold the key as written:\n%s", d.Canonical())
	}
	// with replaces lab b's draw key in the file by spelled, and lab c's by ofC ("" for none).
	with := func(spelled, ofC string) (*NetworkDoc, error) {
		f := strings.Replace(file, `"draw_key": "`+std+`"`, `"draw_key": "`+spelled+`"`, 1)
		if ofC != "" {
			f = strings.Replace(f, `"name": "c",`, `"name": "c", "draw_key": "`+ofC+`",`, 1)
		}
		return ParseNetworkDoc([]byte(f))
	}
	spellings := map[string]string{
		"unpadded":         base64.RawStdEncoding.EncodeToString(pub),
		"URL alphabet":     base64.URLEncoding.EncodeToString(pub),
		"URL, unpadded":    base64.RawURLEncoding.EncodeToString(pub),
		"standard, padded": std,
	}
	for name, s := range spellings {
		got, err := with(s, "")
		if err != nil {
			t.Errorf("%s %q: %v", name, s, err)
			continue
		}
		if l, _ := got.Lab("b"); l.DrawKey != std || got.Hash() != hash || string(got.File()) != file {
			t.Errorf("%s: stored as %q, hash %s: want %q and %s", name, l.DrawKey, got.Hash(), std, hash)
		}
		for other, s2 := range spellings {
			if _, err := with(s, s2); err == nil || !strings.Contains(err.Error(), `labs "b" and "c" have the same draw_key`) {
				t.Errorf("lab b's key %s, lab c's %s: %v, want both labs named as sharing one draw_key", name, other, err)
			}
		}
	}
	// The last character before the padding carries two bits the key does not use; a
	// spelling with them set decoded to the same key before and is kept as written.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	last := strings.IndexByte(alphabet, std[42])
	loose := std[:42] + string(alphabet[last^1]) + "="
	got, err := with(loose, "")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := got.Lab("b"); l.DrawKey != loose || !strings.Contains(string(got.Canonical()), `"draw_key":"`+loose+`"`) {
		t.Errorf("a spelling valid before is rewritten as %q", l.DrawKey)
	}
	for _, k := range got.DrawKeys() {
		if !k.Equal(pub) {
			t.Errorf("%q reads as key %x, want %x", loose, k, pub)
		}
	}
	if _, err := with(loose, std); err == nil || !strings.Contains(err.Error(), "the same draw_key") {
		t.Errorf("one key spelled with and without its unused bits set, by two labs: %v", err)
	}
	for _, bad := range []string{std[:40], base64.RawURLEncoding.EncodeToString(append(pub, 0)), "not-a-key!"} {
		if _, err := with(bad, ""); err == nil || !strings.Contains(err.Error(), "not a base64 ed25519 public key") {
			t.Errorf("draw key %q: %v, want it refused", bad, err)
		}
	}
}
