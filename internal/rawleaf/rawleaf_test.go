package rawleaf

import (
	"crypto/sha256"
	"testing"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

func TestCIDIsPrefixSum(t *testing.T) {
	prefix := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_256, MhLength: -1}
	if !IsPrefix(prefix) {
		t.Fatal("IsPrefix refuses the raw sha2-256 prefix")
	}
	for _, n := range []int{0, 1, 55, 56, 64, 1000, 256 << 10} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		want, err := prefix.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		got := CID(sha256.Sum256(data))
		if !got.Equals(want) {
			t.Fatalf("%d bytes: CID %s, prefix.Sum %s", n, got, want)
		}
		if !Is(got) || !Names(got, sha256.Sum256(data)) {
			t.Fatalf("%d bytes: Is or Names refuses the CID of the bytes", n)
		}
	}
}

func TestShapesOtherThanRawSHA256AreRefused(t *testing.T) {
	data := []byte("leaf")
	for _, p := range []cid.Prefix{
		{Version: 1, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1},
		{Version: 0, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1},
		{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_512, MhLength: -1},
		{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_256, MhLength: 20},
		{Version: 1, Codec: cid.Raw, MhType: mh.IDENTITY, MhLength: -1},
	} {
		c, err := p.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		if Is(c) {
			t.Errorf("Is accepts %s (prefix %+v)", c, p)
		}
		if IsPrefix(p) && p.MhLength != -1 {
			t.Errorf("IsPrefix accepts %+v", p)
		}
		if Names(c, sha256.Sum256(data)) && p.MhType != mh.SHA2_256 {
			t.Errorf("Names matches %s, not a sha2-256 CID", c)
		}
	}
}

func TestCheck2(t *testing.T) {
	a, b := make([]byte, 1024), make([]byte, 1024)
	for i := range a {
		a[i], b[i] = byte(i), byte(i*3+1)
	}
	ca, cb := CID(sha256.Sum256(a)), CID(sha256.Sum256(b))
	if okA, okB := Check2(ca, cb, a, b); !okA || !okB {
		t.Fatalf("Check2 of two good leaves: %v %v", okA, okB)
	}
	bad := append([]byte(nil), b...)
	bad[500] ^= 1
	if okA, okB := Check2(ca, cb, a, bad); !okA || okB {
		t.Fatalf("Check2 with the second leaf corrupt: %v %v, want true false", okA, okB)
	}
	if okA, okB := Check2(cb, ca, a, b); okA || okB {
		t.Fatalf("Check2 with the CIDs swapped: %v %v, want false false", okA, okB)
	}
	if okA, okB := Check2(ca, cb, a, b[:10]); !okA || okB {
		t.Fatalf("Check2 of leaves of different lengths, the second cut short: %v %v, want true false", okA, okB)
	}
	other, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_512, MhLength: -1}.Sum(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, okB := Check2(ca, other, a, b); okB {
		t.Fatal("Check2 matched a sha2-512 CID")
	}
}
