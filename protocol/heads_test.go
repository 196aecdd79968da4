package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/cockroachdb/datadriven"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func testKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return k, id
}

const fp0 = "00112233445566778899aabbccddeeff"

func TestHeadSignDecodeValidate(t *testing.T) {
	k, id := testKey(t)
	_, other := testKey(t)
	h := Head{Version: Version, Network: "net", NetworkDoc: "doc", PeerID: id.String(), Lab: "acme",
		LedgerRoot: strings.Repeat("ab", 32), Attestations: 7, Fingerprint: fp0, Seq: 3}
	b, err := SignHead(h, k)
	if err != nil {
		t.Fatal(err)
	}
	got, v := ValidateHead(b, id, "net")
	if v.Verdict != Accept || *got != h {
		t.Fatalf("valid head: %v %+v", v, got)
	}
	if _, v := ValidateHead(b, other, "net"); v.Verdict != Reject || v.Reason != "sender_mismatch" {
		t.Fatalf("relayed under another sender: %v", v)
	}
	if _, v := ValidateHead(b, id, "othernet"); v.Verdict != Reject {
		t.Fatalf("other network: %v", v)
	}
	tampered := strings.Replace(string(b), `"attestations":7`, `"attestations":8`, 1)
	if _, err := DecodeHead([]byte(tampered)); err == nil {
		t.Fatal("tampered head decoded")
	}
	h.Version = 99
	b99, _ := SignHead(h, k)
	if _, v := ValidateHead(b99, id, "net"); v.Verdict != Ignore {
		t.Fatalf("unknown version: %v, want ignore", v)
	}
	if _, err := DecodeHead(b99); !errors.Is(err, ErrHeadVersion) {
		t.Fatalf("unknown version error %v", err)
	}
}

// A head's seq is its sender's clock in microseconds (SeqTime); minus when it was heard, it
// is the peer's clock offset, reported by Compare. A seq that is a count (a build that
// started it from 0) reports none.
func TestHeadsTrackerClockOffset(t *testing.T) {
	tr := NewHeadsTracker()
	heardAt := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	seqAt := func(d time.Duration) uint64 { return uint64(heardAt.Add(d).UnixMicro()) }
	tr.Observe(Head{PeerID: "ahead", Seq: seqAt(7500 * time.Millisecond)}, heardAt)
	tr.Observe(Head{PeerID: "behind", Seq: seqAt(-90 * time.Second)}, heardAt)
	tr.Observe(Head{PeerID: "old-build", Seq: 41}, heardAt)
	got := map[string]*float64{}
	for _, p := range tr.Compare(OurHead{}, heardAt, 0) {
		got[p.PeerID] = p.ClockOffsetSeconds
	}
	if o := got["ahead"]; o == nil || *o != 7.5 {
		t.Errorf("peer 7.5 s ahead: offset %v", o)
	}
	if o := got["behind"]; o == nil || *o != -90 {
		t.Errorf("peer 90 s behind: offset %v", o)
	}
	if o := got["old-build"]; o != nil {
		t.Errorf("head whose seq is a count: offset %v, want none", *o)
	}
	if _, ok := SeqTime(1 << 63); ok {
		t.Error("a seq past int64 read as a time")
	}
}

func FuzzDecodeHead(f *testing.F) {
	k, id := testKey(f)
	b, _ := SignHead(Head{Version: Version, Network: "n", PeerID: id.String(), Fingerprint: fp0}, k)
	f.Add(b)
	f.Add([]byte(`{"head":{"version":1},"sig":""}`))
	timed, _ := SignHead(Head{Version: Version, Network: "n", PeerID: id.String(), Fingerprint: fp0, Seq: 1_800_000_000_000_000}, k)
	f.Add(timed)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHead(b)
		if err == nil && (h.PeerID == "" || len(h.Fingerprint) != 32) {
			t.Fatalf("accepted a head without peer or fingerprint: %+v", h)
		}
	})
}

// The tracker, as a datadriven state machine: ours sets our head; observe records a peer's
// head at a time; compare prints every peer's status (at now=T with stale=S: with ages).
func TestHeadsTrackerDatadriven(t *testing.T) {
	var tr *HeadsTracker
	var ours OurHead
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	datadriven.RunTest(t, "testdata/heads", func(t *testing.T, d *datadriven.TestData) string {
		args := map[string]string{}
		for _, a := range d.CmdArgs {
			if len(a.Vals) > 0 {
				args[a.Key] = a.Vals[0]
			}
		}
		n, _ := strconv.Atoi(args["n"])
		switch d.Cmd {
		case "reset":
			tr = NewHeadsTracker()
			return "ok\n"
		case "ours":
			ours = OurHead{Network: "net", NetworkDoc: args["doc"], LedgerRoot: args["root"], Attestations: n, Fingerprint: args["fp"]}
			return "ok\n"
		case "observe":
			seq, _ := strconv.ParseUint(args["seq"], 10, 64)
			at, _ := strconv.Atoi(args["t"])
			changed := tr.Observe(Head{Version: Version, Network: "net", NetworkDoc: args["doc"], PeerID: args["peer"],
				LedgerRoot: args["root"], Attestations: n, Fingerprint: args["fp"], Seq: seq}, base.Add(time.Duration(at)*time.Second))
			return fmt.Sprintf("changed=%v needs_sync=%v\n", changed, tr.NeedsSync(ours, args["peer"]))
		case "compare":
			var b strings.Builder
			now, _ := strconv.Atoi(args["now"])
			stale, _ := strconv.Atoi(args["stale"])
			for _, p := range tr.Compare(ours, base.Add(time.Duration(now)*time.Second), time.Duration(stale)*time.Second) {
				fmt.Fprintf(&b, "%s agrees=%v status=%q root=%s last_heard=+%ds", p.PeerID, p.Agrees, p.Status, p.LedgerRoot, int(p.LastHeard.Sub(base).Seconds()))
				if stale > 0 {
					fmt.Fprintf(&b, " age=%gs stale=%v", p.AgeSeconds, p.Stale)
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		return "unknown command\n"
	})
}

func testDoc(t testing.TB) *NetworkDoc {
	pub, _, _ := ed25519.GenerateKey(nil)
	pub2, _, _ := ed25519.GenerateKey(nil)
	k, k2 := base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(pub2)
	d, err := ParseNetworkDoc([]byte(`{"version":1,"network":"airs","labs":[{"name":"zeta","key":"` + k + `"},{"name":"acme","key":"` + k2 + `"}],"ledger":{"replication":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNetworkDocCanonicalAndHash(t *testing.T) {
	d := testDoc(t)
	if d.Labs[0].Name != "acme" || d.Ledger.Worst != "population" || d.Ledger.BootstrapRounds != 100 || !d.CountsExecutor("container") || d.CountsExecutor("process") {
		t.Fatalf("defaults and order: %+v", d)
	}
	again, err := ParseNetworkDoc(d.Canonical())
	if err != nil || again.Hash() != d.Hash() || string(again.Canonical()) != string(d.Canonical()) {
		t.Fatalf("canonical form does not round-trip: %v", err)
	}
	d2 := *d
	d2.Ledger.Replication = 2
	if d2.Hash() == d.Hash() {
		t.Fatal("a different replication gives the same hash")
	}
	if tr, err := d.TrustStore(); err != nil || len(tr.Labs()) != 2 {
		t.Fatalf("trust store from document: %v", err)
	}
	for _, bad := range []string{
		`{"version":2,"network":"a"}`,
		`{"version":1,"network":""}`,
		`{"version":1,"network":"a","ledger":{"worst":"best"}}`,
		`{"version":1,"network":"a","ledger":{"executors":["vm"]}}`,
		`{"version":1,"network":"a","surprise":true}`,
		`{"version":1,"network":"a","labs":[{"name":"x","key":"short"}]}`,
	} {
		if _, err := ParseNetworkDoc([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzParseNetworkDoc(f *testing.F) {
	f.Add(testDoc(f).Canonical())
	f.Add([]byte(`{"version":1,"network":"a"}`))
	f.Add([]byte(`{"version":1,"network":"a","labs":[{"name":"x","key":"8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno=","retired":"2026-01-02T03:04:05.6+01:00"}],"signatures":[{"lab":"x","sig":"AAAA"}]}`))
	f.Add([]byte(`{"version":1,"network":"a","signatures":[]}`))
	f.Add([]byte(`{"version":1,"network":"a","labs":[{"name":"x","key":"8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno=","draw_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}]}`))
	if d, rev := docWithRevocation(f); d.AddRevocation(rev.Raw()) == nil {
		f.Add(d.File())
	}
	f.Add([]byte(`{"version":1,"network":"a","ledger":{"caps":{"agents_per_lab":2,"campaigns_per_lab":0}}}`))
	if id, err := age.GenerateX25519Identity(); err == nil {
		f.Add([]byte(`{"version":1,"network":"a","labs":[{"name":"x","key":"8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno=","age_recipient":"` + id.Recipient().String() +
			`"},{"name":"y","key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}],"ledger":{"scorers":{"` + testBundle + `":["x"]}}}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseNetworkDoc(b)
		if err != nil {
			return
		}
		again, err := ParseNetworkDoc(d.Canonical())
		if err != nil || again.Hash() != d.Hash() {
			t.Fatalf("canonical form of an accepted document does not parse to the same hash: %v", err)
		}
		// The file form keeps the hash and the signatures (field present or not).
		file, err := ParseNetworkDoc(d.File())
		if err != nil || file.Hash() != d.Hash() || (file.Signatures == nil) != (d.Signatures == nil) || len(file.Signatures) != len(d.Signatures) {
			t.Fatalf("file form of an accepted document does not parse back: %v", err)
		}
		_ = d.SignatureReport()
	})
}
