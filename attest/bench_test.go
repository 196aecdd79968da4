package attest

import (
	"crypto/ed25519"
	"testing"
)

// Development benchmarks; the full comparison (100,000 envelopes, one and two cores, ratios
// to crypto/ed25519.Verify) is bench/verify.

func benchEnvelopes(b *testing.B, n int) (*fixture, [][]byte) {
	f := newFixture(b)
	envs := make([][]byte, n)
	for i := range envs {
		envs[i], _ = f.signRun(b, i, "submission", 0.5)
	}
	return f, envs
}

func BenchmarkVerify(b *testing.B) {
	f, envs := benchEnvelopes(b, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Verify(envs[i%len(envs)], f.trust, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyBatch64(b *testing.B) {
	f, envs := benchEnvelopes(b, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		j := i % 448
		_, errs := VerifyBatch(envs[j:j+64], f.trust, t0)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkRawEd25519(b *testing.B) {
	f, envs := benchEnvelopes(b, 512)
	type m struct{ msg, sig []byte }
	ms := make([]m, len(envs))
	for i, e := range envs {
		d, _ := DecodeEnvelope(e)
		ms[i] = m{PAE(d.PayloadType, d.Payload), d.Sig}
	}
	pub, _ := nodePubKey(f.nodeID)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := ms[i%len(ms)]
		if !ed25519.Verify(pub, x.msg, x.sig) {
			b.Fatal("bad")
		}
	}
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	_, envs := benchEnvelopes(b, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeEnvelope(envs[i%len(envs)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStatement(b *testing.B) {
	_, envs := benchEnvelopes(b, 64)
	d, _ := DecodeEnvelope(envs[0])
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, run, _, err := DecodeStatement(d.Payload); err != nil || run == nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVoiExpanded(b *testing.B) {
	f, envs := benchEnvelopes(b, 512)
	type m struct{ msg, sig []byte }
	ms := make([]m, len(envs))
	for i, e := range envs {
		d, _ := DecodeEnvelope(e)
		ms[i] = m{PAE(d.PayloadType, d.Payload), d.Sig}
	}
	pub, _ := nodePubKey(f.nodeID)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := ms[i%len(ms)]
		if !f.trust.verifyKey(pub, x.msg, x.sig) {
			b.Fatal("bad")
		}
	}
}

func BenchmarkDecodeStatementReference(b *testing.B) {
	_, envs := benchEnvelopes(b, 64)
	d, _ := DecodeEnvelope(envs[0])
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, run, _, err := decodeStatementReference(d.Payload); err != nil || run == nil {
			b.Fatal(err)
		}
	}
}
