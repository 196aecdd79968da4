// Package ecvrf is RFC 9381's ECVRF-EDWARDS25519-SHA512-TAI (suite 0x03): a verifiable random
// function whose keys are ed25519 keys. The holder of the secret key computes, for any input
// alpha, a proof pi and from it an output beta; anyone with the public key checks that beta is
// the one output of that key on alpha. Audits draw with it (docs/design.md §9, docs/scoring.md
// "Audits"): a node's draw is unpredictable to everyone without its key and cannot be ground by
// the node itself, since each (key, alpha) has exactly one valid beta, unlike a signature,
// whose signer may pick another nonce and sign again.
//
// The scalar is derived from an ed25519 secret key exactly as RFC 8032 does (SHA-512 of the
// seed, first half clamped), so a node's libp2p ed25519 identity key is a VRF key and lab keys
// stay off the nodes.
//
// Why hand-written: no maintained Go module implements this suite. filippo.io/mostly-harmless/
// vrf-r255 is a VRF over ristretto255, a different group and encoding, so its proofs are not
// RFC 9381's and would not check against other implementations or the RFC's test vectors. The
// group arithmetic is filippo.io/edwards25519 (the code behind crypto/ed25519); this package
// only strings RFC 9381 §5's steps together.
//
// Every function is pure and safe for concurrent use.
package ecvrf

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"errors"

	"filippo.io/edwards25519"
)

const (
	// ProofSize is the length of pi: Gamma (32) ‖ c (16) ‖ s (32).
	ProofSize = 80
	// OutputSize is the length of beta (SHA-512).
	OutputSize = 64

	suite = 0x03
	cLen  = 16
)

// ErrInvalid is returned for every proof or key that RFC 9381 calls INVALID; the verifier
// learns nothing more, which is all RFC 9381 allows it to tell.
var ErrInvalid = errors.New("ecvrf: invalid proof or public key")

// Prove computes pi (ProofSize bytes) and beta (OutputSize bytes) for alpha under priv
// (RFC 9381 §5.1). It is deterministic: the same key and alpha give the same pi.
func Prove(priv ed25519.PrivateKey, alpha []byte) (pi, beta []byte) {
	if len(priv) != ed25519.PrivateKeySize {
		panic("ecvrf: bad private key length")
	}
	h := sha512.Sum512(priv.Seed())
	x, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic(err) // 32 bytes are always accepted
	}
	Y := new(edwards25519.Point).ScalarBaseMult(x)
	pk := Y.Bytes()

	H := encodeToCurve(pk, alpha)
	hString := H.Bytes()
	gamma := new(edwards25519.Point).ScalarMult(x, H)

	// Nonce (RFC 9381 §5.4.2.2, RFC 8032 §5.1.6 step 2): SHA-512(second half of h ‖ h_string)
	// reduced mod q.
	kh := sha512.New()
	kh.Write(h[32:])
	kh.Write(hString)
	k, err := edwards25519.NewScalar().SetUniformBytes(kh.Sum(nil))
	if err != nil {
		panic(err)
	}
	U := new(edwards25519.Point).ScalarBaseMult(k)
	V := new(edwards25519.Point).ScalarMult(k, H)
	cBytes := challenge(pk, hString, gamma.Bytes(), U.Bytes(), V.Bytes())
	c := scalarFromC(cBytes)
	s := edwards25519.NewScalar().MultiplyAdd(c, x, k) // s = k + c·x mod q

	pi = make([]byte, 0, ProofSize)
	pi = append(pi, gamma.Bytes()...)
	pi = append(pi, cBytes...)
	pi = append(pi, s.Bytes()...)
	return pi, gammaToHash(gamma)
}

// Verify checks pi against pub and alpha (RFC 9381 §5.3, with validate_key = TRUE) and
// returns beta. It refuses a public key or Gamma that is not a canonical encoding of a curve
// point, a public key of small order, and s ≥ q.
func Verify(pub ed25519.PublicKey, pi, alpha []byte) (beta []byte, err error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, ErrInvalid
	}
	Y, ok := decodePoint(pub)
	if !ok || isSmallOrder(Y) {
		return nil, ErrInvalid
	}
	gamma, c, s, ok := decodeProof(pi)
	if !ok {
		return nil, ErrInvalid
	}
	H := encodeToCurve(pub, alpha)
	negC := edwards25519.NewScalar().Negate(c)
	// U = s·B − c·Y, V = s·H − c·Gamma.
	U := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(negC, Y, s)
	V := new(edwards25519.Point).VarTimeMultiScalarMult(
		[]*edwards25519.Scalar{s, negC}, []*edwards25519.Point{H, gamma})
	want := challenge(pub, H.Bytes(), pi[:32], U.Bytes(), V.Bytes())
	if !bytes.Equal(want, pi[32:32+cLen]) {
		return nil, ErrInvalid
	}
	return gammaToHash(gamma), nil
}

// ProofToHash returns beta for a proof without checking it against a key (RFC 9381 §5.2).
// Use it only on a proof already verified; on its own it proves nothing.
func ProofToHash(pi []byte) ([]byte, error) {
	gamma, _, _, ok := decodeProof(pi)
	if !ok {
		return nil, ErrInvalid
	}
	return gammaToHash(gamma), nil
}

// decodeProof splits pi (RFC 9381 §5.4.4): Gamma must decode canonically, s must be < q.
func decodeProof(pi []byte) (gamma *edwards25519.Point, c, s *edwards25519.Scalar, ok bool) {
	if len(pi) != ProofSize {
		return nil, nil, nil, false
	}
	gamma, ok = decodePoint(pi[:32])
	if !ok {
		return nil, nil, nil, false
	}
	c = scalarFromC(pi[32 : 32+cLen])
	s, err := edwards25519.NewScalar().SetCanonicalBytes(pi[32+cLen:])
	if err != nil {
		return nil, nil, nil, false
	}
	return gamma, c, s, true
}

// decodePoint is RFC 8032 §5.1.3's decoding, which refuses y ≥ p and x = 0 with the sign bit
// set. edwards25519.Point.SetBytes accepts those non-canonical forms (as most ed25519 code
// does), so a decoded point must re-encode to the same bytes.
func decodePoint(b []byte) (*edwards25519.Point, bool) {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil || !bytes.Equal(p.Bytes(), b) {
		return nil, false
	}
	return p, true
}

// isSmallOrder reports cofactor·P = identity (RFC 9381 §5.4.5, ECVRF_validate_key).
func isSmallOrder(p *edwards25519.Point) bool {
	return new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// encodeToCurve is RFC 9381 §5.4.1.1, try-and-increment with encode_to_curve_salt = PK.
// About half of the counters give a point, so the loop ends after two tries on average; 256
// failures in a row have probability 2^-256.
func encodeToCurve(pk, alpha []byte) *edwards25519.Point {
	for ctr := 0; ctr < 256; ctr++ {
		h := sha512.New()
		h.Write([]byte{suite, 0x01})
		h.Write(pk)
		h.Write(alpha)
		h.Write([]byte{byte(ctr), 0x00})
		sum := h.Sum(nil)
		if p, ok := decodePoint(sum[:32]); ok {
			return p.MultByCofactor(p)
		}
	}
	panic("ecvrf: encode_to_curve found no point in 256 tries")
}

// challenge is RFC 9381 §5.4.3 over (Y, H, Gamma, U, V): the first cLen bytes of
// SHA-512(suite ‖ 0x02 ‖ points ‖ 0x00).
func challenge(points ...[]byte) []byte {
	h := sha512.New()
	h.Write([]byte{suite, 0x02})
	for _, p := range points {
		h.Write(p)
	}
	h.Write([]byte{0x00})
	return h.Sum(nil)[:cLen]
}

// scalarFromC reads the 16-byte little-endian challenge as a scalar (always < q).
func scalarFromC(c []byte) *edwards25519.Scalar {
	var buf [32]byte
	copy(buf[:], c)
	s, err := edwards25519.NewScalar().SetCanonicalBytes(buf[:])
	if err != nil {
		panic(err)
	}
	return s
}

// gammaToHash is RFC 9381 §5.2 step 4: SHA-512(suite ‖ 0x03 ‖ cofactor·Gamma ‖ 0x00).
func gammaToHash(gamma *edwards25519.Point) []byte {
	h := sha512.New()
	h.Write([]byte{suite, 0x03})
	h.Write(new(edwards25519.Point).MultByCofactor(gamma).Bytes())
	h.Write([]byte{0x00})
	return h.Sum(nil)
}
