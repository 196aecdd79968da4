package recon

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"pgregory.net/rapid"
)

// item k of the test sets: time k/3 (several items share a time), ID sha256(k).
func item(k int) Item {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(k))
	return Item{Time: uint64(k / 3), ID: sha256.Sum256(b[:])}
}

// parseSet reads "0:100,200:250" (half-open ranges of item numbers).
func parseSet(t *testing.T, s string) []Item {
	var out []Item
	for _, r := range strings.Split(s, ",") {
		if r == "" {
			continue
		}
		lo, hi, _ := strings.Cut(r, ":")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad range %q", r)
		}
		for k := a; k < b; k++ {
			out = append(out, item(k))
		}
	}
	return out
}

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

type session struct {
	have, need  []ID
	rounds      int
	sent, recvd int
}

// reconcile runs a whole session between a (initiator) and b, in memory.
func reconcile(t tb, a, b Storage, lim Limits) session {
	r := NewInitiator(lim)
	msg := r.Initiate(a)
	var s session
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatalf("no end after 1000 rounds")
		}
		s.sent += len(msg)
		reply, err := Respond(b, msg, lim)
		if err != nil {
			t.Fatal(err)
		}
		s.recvd += len(reply)
		act, err := r.Step(a, reply)
		if err != nil {
			t.Fatal(err)
		}
		s.have = append(s.have, act.Have...)
		s.need = append(s.need, act.Need...)
		if act.Done {
			s.rounds = r.Rounds()
			return s
		}
		msg = act.Send
	}
}

func idSet(items []Item) map[ID]bool {
	m := map[ID]bool{}
	for _, it := range items {
		m[it.ID] = true
	}
	return m
}

func TestDatadriven(t *testing.T) {
	datadriven.RunTest(t, "testdata/reconcile", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "reconcile":
			var as, bs string
			lim := Limits{}
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "a":
					as = a.Vals[0]
				case "b":
					bs = a.Vals[0]
				case "frame":
					lim.FrameSize, _ = strconv.Atoi(a.Vals[0])
				case "idlist":
					lim.MaxIDListReply, _ = strconv.Atoi(a.Vals[0])
				}
			}
			ai, bi := parseSet(t, as), parseSet(t, bs)
			s := reconcile(t, NewIndex(ai), NewIndex(bi), lim)
			checkDifference(t, ai, bi, s)
			return fmt.Sprintf("rounds=%d have=%d need=%d sent=%d received=%d\n", s.rounds, len(s.have), len(s.need), s.sent, s.recvd)
		}
		return "unknown command " + d.Cmd
	})
}

// checkDifference asserts have = a\b and need = b\a exactly, without duplicates.
func checkDifference(t tb, a, b []Item, s session) {
	t.Helper()
	am, bm := idSet(a), idSet(b)
	want := func(x, y map[ID]bool) map[ID]bool {
		m := map[ID]bool{}
		for id := range x {
			if !y[id] {
				m[id] = true
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		got  []ID
		want map[ID]bool
	}{{"have", s.have, want(am, bm)}, {"need", s.need, want(bm, am)}} {
		seen := map[ID]bool{}
		for _, id := range c.got {
			if seen[id] {
				t.Fatalf("%s lists %x twice", c.name, id[:4])
			}
			seen[id] = true
			if !c.want[id] {
				t.Fatalf("%s lists %x, which is not in the difference", c.name, id[:4])
			}
		}
		if len(seen) != len(c.want) {
			t.Fatalf("%s has %d IDs, the difference has %d", c.name, len(seen), len(c.want))
		}
	}
}

// Any two sets reconcile to their exact difference, whatever the limits.
func TestReconcileProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 3000).Draw(rt, "n")
		var a, b []Item
		for k := 0; k < n; k++ {
			switch rapid.IntRange(0, 9).Draw(rt, "where") {
			case 0:
				a = append(a, item(k))
			case 1:
				b = append(b, item(k))
			default:
				a, b = append(a, item(k)), append(b, item(k))
			}
		}
		lim := Limits{FrameSize: rapid.SampledFrom([]int{0, 4096, 16384}).Draw(rt, "frame"),
			MaxIDListReply: rapid.SampledFrom([]int{0, 32, 100}).Draw(rt, "idlist")}
		checkDifference(rt, a, b, reconcile(rt, NewIndex(a), NewIndex(b), lim))
	})
}

// The index's fingerprints equal the direct computation after any sequence of inserts.
func TestIndexIncremental(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		x := NewIndex(nil)
		var ref []Item
		n := rapid.IntRange(0, 5000).Draw(rt, "n")
		for k := 0; k < n; k++ {
			it := item(rapid.IntRange(0, 4000).Draw(rt, "k"))
			added := x.Insert(it)
			if added == slices.Contains(ref, it) {
				rt.Fatalf("Insert(%d) = %v, already there: %v", k, added, !added)
			}
			if added {
				ref = append(ref, it)
			}
		}
		slices.SortFunc(ref, Item.Compare)
		if x.Len() != len(ref) || !slices.Equal(x.Items(), ref) {
			rt.Fatalf("index holds %d items, want %d in order", x.Len(), len(ref))
		}
		i := rapid.IntRange(0, len(ref)).Draw(rt, "i")
		j := rapid.IntRange(i, len(ref)).Draw(rt, "j")
		if got, want := x.Fingerprint(i, j), FingerprintOf(ref[i:j]); got != want {
			rt.Fatalf("Fingerprint(%d,%d) = %x, want %x", i, j, got, want)
		}
		if len(ref) > 0 {
			p := rapid.IntRange(0, len(ref)-1).Draw(rt, "p")
			if x.At(p) != ref[p] || x.LowerBound(ref[p]) != p || !x.Has(ref[p]) {
				rt.Fatalf("At/LowerBound/Has disagree at %d", p)
			}
		}
	})
}

func TestVarint(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 300, 1 << 35, 1<<64 - 1} {
		b := appendVarint(nil, n)
		v, k := readVarint(b)
		if v != n || k != len(b) {
			t.Fatalf("varint %d: read %d (%d bytes of %d)", n, v, k, len(b))
		}
	}
	// negentropy's form: most significant group first.
	if got := appendVarint(nil, 300); !bytes.Equal(got, []byte{0x82, 0x2c}) {
		t.Fatalf("varint 300 = %x, want 822c", got)
	}
}

func TestRespondRefusesOtherVersion(t *testing.T) {
	reply, err := Respond(NewIndex(nil), []byte{0x62}, Limits{})
	if err == nil || !bytes.Equal(reply, []byte{ProtocolVersion}) {
		t.Fatalf("reply %x err %v: want our version byte and an error", reply, err)
	}
}

func FuzzRespond(f *testing.F) {
	x := NewIndex(parseSet(&testing.T{}, "0:200"))
	f.Add(NewInitiator(Limits{}).Initiate(x))
	f.Add(NewInitiator(Limits{}).Initiate(NewIndex(nil)))
	f.Add([]byte{ProtocolVersion, 0, 0, ModeFingerprint})
	f.Add([]byte{ProtocolVersion, 5, 1, 7, ModeIDList, 1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, err := Respond(x, msg, Limits{FrameSize: 4096})
		if err == nil && (len(out) == 0 || out[0] != ProtocolVersion || len(out) > MaxMessageSize) {
			t.Fatalf("reply of %d bytes without the version byte or too large", len(out))
		}
		// What we write, we read.
		if err == nil {
			if _, err := Respond(x, out, Limits{}); err != nil {
				t.Fatalf("our own reply does not decode: %v", err)
			}
		}
	})
}

func FuzzInitiatorStep(f *testing.F) {
	x := NewIndex(parseSet(&testing.T{}, "0:100"))
	y := NewIndex(parseSet(&testing.T{}, "50:150"))
	m, _ := Respond(y, NewInitiator(Limits{}).Initiate(x), Limits{})
	f.Add(m)
	f.Add([]byte{ProtocolVersion})
	f.Fuzz(func(t *testing.T, msg []byte) {
		r := NewInitiator(Limits{FrameSize: 4096})
		a, err := r.Step(x, msg)
		if err == nil && !a.Done && (len(a.Send) == 0 || a.Send[0] != ProtocolVersion) {
			t.Fatalf("step sends %x", a.Send)
		}
	})
}
