package ecvrf

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
	"testing"

	"filippo.io/edwards25519"
)

// RFC 9381 Appendix B.3, Examples 16–18 (ECVRF-EDWARDS25519-SHA512-TAI), with the
// intermediate H so a failure says which step went wrong.
var rfcVectors = []struct {
	sk, pk, alpha, h, pi, beta string
}{
	{
		sk:    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
		pk:    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
		alpha: "",
		h:     "91bbed02a99461df1ad4c6564a5f5d829d0b90cfc7903e7a5797bd658abf3318",
		pi:    "8657106690b5526245a92b003bb079ccd1a92130477671f6fc01ad16f26f723f26f8a57ccaed74ee1b190bed1f479d9727d2d0f9b005a6e456a35d4fb0daab1268a1b0db10836d9826a528ca76567805",
		beta:  "90cf1df3b703cce59e2a35b925d411164068269d7b2d29f3301c03dd757876ff66b71dda49d2de59d03450451af026798e8f81cd2e333de5cdf4f3e140fdd8ae",
	},
	{
		sk:    "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
		pk:    "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
		alpha: "72",
		h:     "5b659fc3d4e9263fd9a4ed1d022d75eaacc20df5e09f9ea937502396598dc551", // ctr = 1
		pi:    "f3141cd382dc42909d19ec5110469e4feae18300e94f304590abdced48aed5933bf0864a62558b3ed7f2fea45c92a465301b3bbf5e3e54ddf2d935be3b67926da3ef39226bbc355bdc9850112c8f4b02",
		beta:  "eb4440665d3891d668e7e0fcaf587f1b4bd7fbfe99d0eb2211ccec90496310eb5e33821bc613efb94db5e5b54c70a848a0bef4553a41befc57663b56373a5031",
	},
	{
		sk:    "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
		pk:    "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
		alpha: "af82",
		h:     "bf4339376f5542811de615e3313d2b36f6f53c0acfebb482159711201192576a",
		pi:    "9bc0f79119cc5604bf02d23b4caede71393cedfbb191434dd016d30177ccbf8096bb474e53895c362d8628ee9f9ea3c0e52c7a5c691b6c18c9979866568add7a2d41b00b05081ed0f58ee5e31b3a970e",
		beta:  "645427e5d00c62a23fb703732fa5d892940935942101e456ecca7bb217c61c452118fec1219202a0edcf038bb6373241578be7217ba85a2687f7a0310b2df19f",
	},
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRFC9381Vectors(t *testing.T) {
	for _, v := range rfcVectors {
		priv := ed25519.NewKeyFromSeed(unhex(t, v.sk))
		pub := priv.Public().(ed25519.PublicKey)
		alpha := unhex(t, v.alpha)
		if got := hex.EncodeToString(pub); got != v.pk {
			t.Fatalf("alpha %q: public key %s, want %s", v.alpha, got, v.pk)
		}
		if got := hex.EncodeToString(encodeToCurve(pub, alpha).Bytes()); got != v.h {
			t.Errorf("alpha %q: H = %s, want %s", v.alpha, got, v.h)
		}
		pi, beta := Prove(priv, alpha)
		if got := hex.EncodeToString(pi); got != v.pi {
			t.Errorf("alpha %q: pi = %s, want %s", v.alpha, got, v.pi)
		}
		if got := hex.EncodeToString(beta); got != v.beta {
			t.Errorf("alpha %q: beta = %s, want %s", v.alpha, got, v.beta)
		}
		vb, err := Verify(pub, unhex(t, v.pi), alpha)
		if err != nil || hex.EncodeToString(vb) != v.beta {
			t.Errorf("alpha %q: Verify = %x, %v; want the RFC's beta", v.alpha, vb, err)
		}
		hb, err := ProofToHash(unhex(t, v.pi))
		if err != nil || hex.EncodeToString(hb) != v.beta {
			t.Errorf("alpha %q: ProofToHash = %x, %v", v.alpha, hb, err)
		}
	}
}

// Every single-bit change to a valid proof, its key or its input is refused.
func TestVerifyRefusesAnyChange(t *testing.T) {
	v := rfcVectors[1]
	pub, pi, alpha := unhex(t, v.pk), unhex(t, v.pi), unhex(t, v.alpha)
	for i := range pi {
		for bit := 0; bit < 8; bit++ {
			bad := bytes.Clone(pi)
			bad[i] ^= 1 << bit
			if _, err := Verify(pub, bad, alpha); err == nil {
				t.Fatalf("proof with byte %d bit %d flipped verified", i, bit)
			}
		}
	}
	for i := range pub {
		bad := bytes.Clone(pub)
		bad[i] ^= 1
		if _, err := Verify(bad, pi, alpha); err == nil {
			t.Fatalf("key with byte %d flipped verified", i)
		}
	}
	if _, err := Verify(pub, pi, []byte{0x73}); err == nil {
		t.Fatal("proof verified for another alpha")
	}
	if _, err := Verify(pub, pi[:ProofSize-1], alpha); err == nil {
		t.Fatal("short proof verified")
	}
}

// s + q is the same scalar mod q, so without the s < q check a second proof string would
// verify for the same beta (malleability RFC 9381 §5.4.4 rules out).
func TestVerifyRefusesNonCanonicalS(t *testing.T) {
	v := rfcVectors[0]
	pub, pi, alpha := unhex(t, v.pk), unhex(t, v.pi), unhex(t, v.alpha)
	q, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	s := new(big.Int).SetBytes(reverse(pi[48:]))
	s.Add(s, q)
	bad := bytes.Clone(pi)
	sb := make([]byte, 32)
	s.FillBytes(sb)
	copy(bad[48:], reverse(sb))
	if _, err := Verify(pub, bad, alpha); err == nil {
		t.Fatal("proof with s+q verified")
	}
}

// A small-order public key would let anyone prove any beta: with Y the identity and Gamma
// the identity, U = s·B and V = s·H do not depend on c, so the challenge can be computed
// last. validate_key refuses such keys.
func TestVerifyRefusesSmallOrderKey(t *testing.T) {
	identity := edwards25519.NewIdentityPoint()
	pk := identity.Bytes()
	alpha := []byte("slot-7/attempt-0")
	s, _ := edwards25519.NewScalar().SetUniformBytes(bytes.Repeat([]byte{7}, 64))
	H := encodeToCurve(pk, alpha)
	U := new(edwards25519.Point).ScalarBaseMult(s)
	V := new(edwards25519.Point).ScalarMult(s, H)
	c := challenge(pk, H.Bytes(), identity.Bytes(), U.Bytes(), V.Bytes())
	pi := append(append(identity.Bytes(), c...), s.Bytes()...)
	if _, err := Verify(pk, pi, alpha); err == nil {
		t.Fatal("forged proof under the identity key verified")
	}
}

// RFC 8032 decoding refuses y ≥ p and x = 0 with its sign bit set; edwards25519's SetBytes
// takes both, so the re-encoding check is what refuses them.
func TestDecodePointRefusesNonCanonical(t *testing.T) {
	yIsPPlus1 := unhex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f") // y = 1 + p
	negZero := unhex(t, "0100000000000000000000000000000000000000000000000000000000000080")   // identity, sign bit set
	for _, b := range [][]byte{yIsPPlus1, negZero} {
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			t.Fatalf("%x: the library refuses it already (%v); this test no longer tests our check", b, err)
		}
		if _, ok := decodePoint(b); ok {
			t.Errorf("%x decoded", b)
		}
		pi := append(bytes.Clone(b), make([]byte, 48)...)
		if _, err := ProofToHash(pi); err == nil {
			t.Errorf("proof with Gamma %x hashed", b)
		}
	}
}

func TestProveVerifyRoundTrip(t *testing.T) {
	for i := 0; i < 20; i++ {
		seed := bytes.Repeat([]byte{byte(i + 1)}, 32)
		priv := ed25519.NewKeyFromSeed(seed)
		alpha := []byte{byte(i), byte(i * 7)}
		pi, beta := Prove(priv, alpha)
		got, err := Verify(priv.Public().(ed25519.PublicKey), pi, alpha)
		if err != nil || !bytes.Equal(got, beta) {
			t.Fatalf("key %d: Verify = %x, %v; want %x", i, got, err, beta)
		}
	}
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return r
}

func FuzzVerify(f *testing.F) {
	for _, v := range rfcVectors {
		pi, _ := hex.DecodeString(v.pi)
		alpha, _ := hex.DecodeString(v.alpha)
		f.Add(pi, alpha)
	}
	pub, _ := hex.DecodeString(rfcVectors[0].pk)
	piOK, _ := hex.DecodeString(rfcVectors[0].pi)
	f.Fuzz(func(t *testing.T, pi, alpha []byte) {
		beta, err := Verify(pub, pi, alpha)
		if err != nil {
			return
		}
		// Only the RFC's own proof for the empty alpha can verify under this key.
		if !bytes.Equal(pi, piOK) || len(alpha) != 0 {
			t.Fatalf("unexpected proof verified: %x for alpha %x", pi, alpha)
		}
		if h, err := ProofToHash(pi); err != nil || !bytes.Equal(h, beta) {
			t.Fatalf("ProofToHash disagrees with Verify")
		}
	})
}

func BenchmarkProve(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	alpha := bytes.Repeat([]byte{2}, 80)
	for b.Loop() {
		Prove(priv, alpha)
	}
}

func BenchmarkVerify(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	pub := priv.Public().(ed25519.PublicKey)
	alpha := bytes.Repeat([]byte{2}, 80)
	pi, _ := Prove(priv, alpha)
	for b.Loop() {
		if _, err := Verify(pub, pi, alpha); err != nil {
			b.Fatal(err)
		}
	}
}
