package attest

import (
	"sync"
	"testing"
	"time"
)

func TestCacheNeverVerifiesTwiceButReappliesPolicy(t *testing.T) {
	f := newFixture(t)
	env, id := f.signRun(t, 0, "sub", 0.9)
	c, err := NewCache(16)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := c.Verify(env, f.trust, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Lookup(id); !ok || got != v1 {
		t.Fatal("Lookup by envelope ID misses a verified envelope")
	}
	// A fresh verification builds a new *Verified; the hit hands back the remembered one.
	v2, err := c.Verify(env, f.trust, t0)
	if err != nil || v2 != v1 {
		t.Fatalf("second Verify: %v, same result %v", err, v2 == v1)
	}
	// Policy is re-applied: the clock moved past the certificate.
	if _, err := c.Verify(env, f.trust, f.cert.NotAfter.Add(time.Second)); ReasonOf(err) != ReasonCertExpired {
		t.Fatalf("cached envelope after expiry: %v", err)
	}
	// ... and a trust store without the lab refuses it.
	if _, err := c.Verify(env, NewTrustStore(), t0); ReasonOf(err) != ReasonUnknownLab {
		t.Fatalf("cached envelope under empty trust: %v", err)
	}
	// Intrinsic refusals are remembered; trust-dependent ones are not.
	bad := mutate(t, env, func(m map[string]any) { sig0(m)["sig"] = "AAAA" + sig0(m)["sig"].(string)[4:] })
	if _, err := c.Verify(bad, f.trust, t0); ReasonOf(err) != ReasonBadSignature {
		t.Fatal(err)
	}
	other := newFixture(t)
	stranger, _ := other.signRun(t, 0, "x", 1)
	if _, err := c.Verify(stranger, f.trust, t0); ReasonOf(err) != ReasonUnknownLab {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Fatalf("cache holds %d entries, want 2 (the good and the badly signed)", c.Len())
	}
	f.trust.AddLab("other", other.lab.Pub)
	if _, err := c.Verify(stranger, f.trust, t0); err != nil {
		t.Fatalf("after trusting the lab: %v", err)
	}
}

func TestCacheBounded(t *testing.T) {
	f := newFixture(t)
	c, _ := NewCache(4)
	for i := 0; i < 10; i++ {
		env, _ := f.signRun(t, i, "s", 0.1)
		if _, err := c.Verify(env, f.trust, t0); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 4 {
		t.Fatalf("cache holds %d, bound 4", c.Len())
	}
}

// Run with -race: many goroutines verifying overlapping envelopes through one cache and
// one trust store.
func TestCacheConcurrent(t *testing.T) {
	f := newFixture(t)
	var envs [][]byte
	for i := 0; i < 16; i++ {
		e, _ := f.signRun(t, i, "s", 0.1)
		envs = append(envs, e)
	}
	c, _ := NewCache(8)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				env := envs[(g*7+i)%len(envs)]
				var err error
				if i%5 == 0 {
					_, es := c.VerifyBatch([][]byte{env, envs[i%len(envs)]}, f.trust, t0)
					err = es[0]
				} else {
					_, err = c.Verify(env, f.trust, t0)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestBatchMatchesSingle(t *testing.T) {
	f := newFixture(t)
	var envs [][]byte
	for i := 0; i < 20; i++ {
		e, _ := f.signRun(t, i, "s", 0.3)
		if i == 7 { // one forged signature in the batch
			forged := sigOf(t, envs[0]) // another statement's signature
			e = mutate(t, e, func(m map[string]any) { sig0(m)["sig"] = forged })
		}
		envs = append(envs, e)
	}
	vs, errs := VerifyBatch(envs, f.trust, t0)
	for i := range envs {
		v, err := Verify(envs[i], f.trust, t0)
		if ReasonOf(err) != ReasonOf(errs[i]) || (err == nil) != (errs[i] == nil) {
			t.Fatalf("envelope %d: batch %v, single %v", i, errs[i], err)
		}
		if err == nil && vs[i].ID != v.ID {
			t.Fatalf("envelope %d: IDs differ", i)
		}
	}
	if ReasonOf(errs[7]) != ReasonBadSignature {
		t.Fatalf("forged signature in a batch: %v", errs[7])
	}
	// A batch through the cache answers the remembered ones from memory.
	c, _ := NewCache(64)
	c.Verify(envs[0], f.trust, t0)
	cvs, cerrs := c.VerifyBatch(envs, f.trust, t0)
	for i := range envs {
		if (cerrs[i] == nil) != (errs[i] == nil) {
			t.Fatalf("cached batch %d: %v vs %v", i, cerrs[i], errs[i])
		}
	}
	if first, _ := c.Lookup(cvs[0].ID); first != cvs[0] {
		t.Fatal("cached batch did not reuse the remembered result")
	}
	if c.Len() != len(envs) {
		t.Fatalf("cache holds %d after the batch, want %d", c.Len(), len(envs))
	}
}

func sigOf(t *testing.T, env []byte) string {
	var s string
	mutate(t, env, func(m map[string]any) { s = sig0(m)["sig"].(string) })
	return s
}
