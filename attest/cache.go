package attest

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache remembers verification results by envelope ID so the same bytes are never verified
// twice. What it keeps depends only on the bytes: an accepted envelope (its signature chain
// and statement checked), or a refusal whose reason is intrinsic (bad signature, malformed
// ...). The trust policy (lab trusted, certificate window, revocations) is re-applied on
// every hit, so changing the trust store or the clock never serves a stale verdict.
// Safe for concurrent use; bounded (least recently used entries go first).
type Cache struct {
	lru *lru.Cache[[32]byte, cacheEntry]
}

type cacheEntry struct {
	v   *Verified
	err error
}

// NewCache returns a cache holding at most size envelopes (size > 0).
func NewCache(size int) (*Cache, error) {
	l, err := lru.New[[32]byte, cacheEntry](size)
	if err != nil {
		return nil, err
	}
	return &Cache{lru: l}, nil
}

// Verify is attest.Verify with memory.
func (c *Cache) Verify(envelope []byte, trust *TrustStore, now time.Time) (*Verified, error) {
	key := sumKey(envelope)
	if e, ok := c.lru.Get(key); ok {
		if e.err != nil {
			return nil, e.err
		}
		if err := trust.policy(e.v, now); err != nil {
			return nil, err
		}
		return e.v, nil
	}
	v, err := verifyDigest(envelope, key, trust, now)
	c.remember(key, v, err)
	return v, err
}

func (c *Cache) remember(key [32]byte, v *Verified, err error) {
	switch {
	case err == nil:
		c.lru.Add(key, cacheEntry{v: v})
	case intrinsic(ReasonOf(err)):
		c.lru.Add(key, cacheEntry{err: err})
	}
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
