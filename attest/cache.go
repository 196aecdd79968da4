package attest

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache remembers verification results by envelope ID so the same bytes are never verified
// twice. What it keeps depends only on the bytes: an accepted envelope (its signature chain
// and statement checked), or a refusal whose reason is intrinsic (bad signature, malformed
// ...). The trust policy (lab trusted, certificate window, revocations) is re-applied on
// every hit, so changing the trust store or the clock never serves a stale verdict.
// Safe for concurrent use: callers asking about the same new bytes at once share one
// verification (the others wait for it). Bounded (least recently used entries go first).
type Cache struct {
	lru *lru.Cache[[32]byte, cacheEntry]

	mu       sync.Mutex
	inflight map[[32]byte]*pending // envelopes being verified now, by digest
}

type cacheEntry struct {
	v   *Verified
	err error
}

// pending is one verification in progress; done is closed once v and err are set.
type pending struct {
	done chan struct{}
	v    *Verified
	err  error
}

// NewCache returns a cache holding at most size envelopes (size > 0).
func NewCache(size int) (*Cache, error) {
	l, err := lru.New[[32]byte, cacheEntry](size)
	if err != nil {
		return nil, err
	}
	return &Cache{lru: l, inflight: map[[32]byte]*pending{}}, nil
}

// Verify is attest.Verify with memory.
func (c *Cache) Verify(envelope []byte, trust *TrustStore, now time.Time) (*Verified, error) {
	return c.VerifyWith(envelope, trust, VerifyOptions{Now: now})
}

// VerifyWith is attest.VerifyWith with memory. What the cache keeps is the same in either
// mode (the signature chain and statement checked, or an intrinsic refusal); the policy of
// o's mode and time is applied to it on every answer, so a verdict reached at the claimed
// time never answers a caller checking at now, nor the reverse.
func (c *Cache) VerifyWith(envelope []byte, trust *TrustStore, o VerifyOptions) (*Verified, error) {
	key := sumKey(envelope)
	if e, ok := c.lru.Get(key); ok {
		return e.answer(trust, o)
	}
	e, own, wait := c.claim(key)
	switch {
	case e != nil:
		return e.answer(trust, o)
	case wait != nil:
		if testHookWaiting != nil {
			testHookWaiting()
		}
		<-wait.done
		if r, ok := shared(wait); ok {
			return r.answer(trust, o)
		}
		// Refused for a reason of the other caller's trust store or clock: decide under
		// ours. Such refusals come before the signature check, so no signature is
		// checked twice.
		return verifyDigest(envelope, key, trust, o)
	}
	v, err := verifyCore(envelope, key, trust, o)
	c.settle(key, own, v, err)
	return answerCore(v, err, trust, o)
}

// answerCore finishes a fresh verifyCore verdict with the claimed-time window.
func answerCore(v *Verified, err error, trust *TrustStore, o VerifyOptions) (*Verified, error) {
	if err != nil {
		return nil, err
	}
	if err := trust.claimedPolicy(v, o); err != nil {
		return nil, err
	}
	return v, nil
}

// testHookWaiting, when set (tests only), is called when a Verify caller starts waiting for
// another's verification of the same bytes.
var testHookWaiting func()

// claim, under the lock, finds the entry remembered meanwhile, or another caller's
// verification of the same bytes to wait for, or registers ours (own).
func (c *Cache) claim(key [32]byte) (e *cacheEntry, own, wait *pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.inflight[key]; ok {
		return nil, nil, p
	}
	// A verification may have finished between the caller's Get and the lock.
	if got, ok := c.lru.Peek(key); ok {
		return &got, nil, nil
	}
	own = &pending{done: make(chan struct{})}
	c.inflight[key] = own
	return nil, own, nil
}

// settle remembers a finished verification and releases those waiting for it. The entry is
// remembered before it leaves inflight, so a newcomer finds one or the other.
func (c *Cache) settle(key [32]byte, own *pending, v *Verified, err error) {
	c.remember(key, v, err)
	own.v, own.err = v, err
	c.mu.Lock()
	delete(c.inflight, key)
	c.mu.Unlock()
	close(own.done)
}

// shared returns another caller's finished verification when it holds for any trust store
// and clock (accepted, or refused for an intrinsic reason).
func shared(p *pending) (*cacheEntry, bool) {
	if p.err == nil || intrinsic(ReasonOf(p.err)) {
		return &cacheEntry{v: p.v, err: p.err}, true
	}
	return nil, false
}

// answer applies the trust policy to a remembered verdict.
func (e *cacheEntry) answer(trust *TrustStore, o VerifyOptions) (*Verified, error) {
	if e.err != nil {
		return nil, e.err
	}
	if err := trust.policy(e.v, o); err != nil {
		return nil, err
	}
	return e.v, nil
}

func (c *Cache) remember(key [32]byte, v *Verified, err error) {
	switch {
	case err == nil:
		c.lru.Add(key, cacheEntry{v: v})
	case intrinsic(ReasonOf(err)):
		c.lru.Add(key, cacheEntry{err: err})
	}
}

// VerifyBatch is attest.VerifyBatch with memory: remembered envelopes are answered from the
// cache (trust policy re-applied), envelopes another caller is verifying now are waited
// for, and the rest are batch-verified once each (repeats within the batch included) and
// remembered.
func (c *Cache) VerifyBatch(envelopes [][]byte, trust *TrustStore, now time.Time) ([]*Verified, []error) {
	return c.VerifyBatchWith(envelopes, trust, VerifyOptions{Now: now})
}

// VerifyBatchWith is attest.VerifyBatchWith with memory, as VerifyBatch.
func (c *Cache) VerifyBatchWith(envelopes [][]byte, trust *TrustStore, o VerifyOptions) ([]*Verified, []error) {
	results := make([]*Verified, len(envelopes))
	errs := make([]error, len(envelopes))
	keys := make([][32]byte, len(envelopes))
	var miss [][]byte
	var missKeys [][32]byte
	var missOwn []*pending
	ownIdx := map[int]int{}     // envelope index -> its position in miss
	waits := map[int]*pending{} // envelope index -> a verification to wait for
	for i, env := range envelopes {
		keys[i] = sumKey(env)
		if e, ok := c.lru.Get(keys[i]); ok {
			results[i], errs[i] = e.answer(trust, o)
			continue
		}
		e, own, wait := c.claim(keys[i])
		switch {
		case e != nil:
			results[i], errs[i] = e.answer(trust, o)
		case wait != nil:
			waits[i] = wait // another caller's, or an earlier repeat in this batch
		default:
			ownIdx[i] = len(miss)
			miss = append(miss, env)
			missKeys = append(missKeys, keys[i])
			missOwn = append(missOwn, own)
		}
	}
	vs, es := verifyBatch(miss, missKeys, trust, o)
	for j := range miss {
		c.settle(missKeys[j], missOwn[j], vs[j], es[j])
	}
	for i, j := range ownIdx {
		results[i], errs[i] = answerCore(vs[j], es[j], trust, o)
	}
	for i, p := range waits {
		<-p.done
		if r, ok := shared(p); ok {
			results[i], errs[i] = r.answer(trust, o)
		} else {
			results[i], errs[i] = verifyDigest(envelopes[i], keys[i], trust, o)
		}
	}
	return results, errs
}

// Len is the number of envelopes remembered.
func (c *Cache) Len() int { return c.lru.Len() }

// Lookup returns the accepted envelope with this ID (EnvelopeID), if remembered. It does
// not re-apply the trust policy: use Verify for a verdict.
func (c *Cache) Lookup(id string) (*Verified, bool) {
	k, ok := digestOfID(id)
	if !ok {
		return nil, false
	}
	e, ok := c.lru.Peek(k)
	if !ok || e.v == nil {
		return nil, false
	}
	return e.v, true
}
