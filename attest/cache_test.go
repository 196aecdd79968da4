package attest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
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

// countSigChecks counts envelope signature checks (single and batched) until the test ends.
func countSigChecks(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	testHookSigCheck = func() { n.Add(1) }
	t.Cleanup(func() { testHookSigCheck = nil })
	return &n
}

// The cache's promise, counted: each distinct envelope's signature is checked once, however
// often, however (single or batch), by however many goroutines at once it is asked about,
// and whatever the trust store or clock of the asker.
func TestCacheChecksEachSignatureOnce(t *testing.T) {
	f := newFixture(t)
	var envs [][]byte
	for i := 0; i < 12; i++ {
		e, _ := f.signRun(t, i, "s", 0.1)
		envs = append(envs, e)
	}
	bad := mutate(t, envs[0], func(m map[string]any) { sig0(m)["sig"] = sigOf(t, envs[1]) })
	envs = append(envs, bad)
	n := countSigChecks(t)

	// Uncached, every call checks again: the counter sees it (the test can fail).
	Verify(envs[0], f.trust, t0)
	Verify(envs[0], f.trust, t0)
	if n.Load() != 2 {
		t.Fatalf("two plain Verify calls counted %d signature checks, want 2", n.Load())
	}
	n.Store(0)

	// Repeats within one batch are checked once.
	c, _ := NewCache(64)
	if _, errs := c.VerifyBatch([][]byte{envs[0], envs[1], envs[0], envs[0], bad, bad}, f.trust, t0); errs[2] != nil || ReasonOf(errs[5]) != ReasonBadSignature {
		t.Fatalf("batch with repeats: %v", errs)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("a batch of 3 distinct envelopes (6 with repeats) checked %d signatures", got)
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			for round := 0; round < 3; round++ {
				if g%2 == 0 {
					// A batch with repeats of its own.
					c.VerifyBatch(slices.Concat(envs[g:], envs[:g+2]), f.trust, t0)
				} else {
					for i := range envs {
						c.Verify(envs[(i+g)%len(envs)], f.trust, t0)
					}
				}
			}
		}(g)
	}
	close(start)
	wg.Wait()
	if got := n.Load(); got != int64(len(envs)) {
		t.Fatalf("%d signature checks for %d distinct envelopes asked about %d times", got, len(envs), 8*3*len(envs))
	}
	// Other trust stores and clocks are answered from memory too (policy re-applied).
	if _, err := c.Verify(envs[3], NewTrustStore(), t0); ReasonOf(err) != ReasonUnknownLab {
		t.Fatalf("empty trust store: %v", err)
	}
	if _, err := c.Verify(envs[3], f.trust, f.cert.NotAfter); ReasonOf(err) != ReasonCertExpired {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := c.Verify(bad, f.trust, t0); ReasonOf(err) != ReasonBadSignature {
		t.Fatalf("remembered bad signature: %v", err)
	}
	if got := n.Load(); got != int64(len(envs)) {
		t.Fatalf("re-asking under another trust store or clock checked %d more signatures", got-int64(len(envs)))
	}
}

// Two callers asking about the same new bytes at the same moment share one check: the second
// waits for the first instead of checking again. The first check is held open until the
// second caller has either started its own check (the flaw) or started waiting.
func TestCacheConcurrentCallersShareOneCheck(t *testing.T) {
	f := newFixture(t)
	env, _ := f.signRun(t, 0, "s", 0.1)
	c, _ := NewCache(8)

	var checks atomic.Int64
	release := make(chan struct{})
	second := make(chan string, 2)
	testHookSigCheck = func() {
		if checks.Add(1) == 1 {
			<-release // hold the first check open
		} else {
			second <- "checked again"
		}
	}
	testHookWaiting = func() { second <- "waiting" }
	t.Cleanup(func() { testHookSigCheck, testHookWaiting = nil, nil })

	type result struct {
		v   *Verified
		err error
	}
	res := make(chan result, 2)
	ask := func() { v, err := c.Verify(env, f.trust, t0); res <- result{v, err} }
	go ask()
	testutil.WaitFor(t, 10*time.Second, "one check", func() bool { return checks.Load() == 1 })
	go ask()
	select {
	case what := <-second:
		if what != "waiting" {
			t.Errorf("the second caller %s while the first check was in progress", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second caller neither checked nor waited")
	}
	close(release)
	a, b := <-res, <-res
	if a.err != nil || b.err != nil || a.v != b.v {
		t.Fatalf("results %+v %+v: want one shared acceptance", a, b)
	}
	if checks.Load() != 1 {
		t.Fatalf("%d signature checks, want 1", checks.Load())
	}
}
