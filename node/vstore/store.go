package vstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/scoring"
)

// Source says where an envelope came from.
type Source string

const (
	SourceGossip Source = "gossip"
	SourceSync   Source = "sync"
	SourceLocal  Source = "local"
	SourceImport Source = "import"
)

// AddStatus is what became of one envelope given to Set.Add.
type AddStatus string

const (
	StatusNew     AddStatus = "new"     // verified and stored now
	StatusKnown   AddStatus = "known"   // already stored
	StatusRefused AddStatus = "refused" // did not verify (now or before): kept apart, never forwarded
)

// AddResult is the outcome for one envelope.
type AddResult struct {
	ID     string    `json:"id"`
	Status AddStatus `json:"status"`
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// StoredRefusal is one refused envelope as the store keeps it.
type StoredRefusal struct {
	ID     string    `json:"id"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	Source Source    `json:"source"`
	From   string    `json:"from,omitempty"` // peer ID or file it came from
	Time   time.Time `json:"time"`
}

type refusedRecord struct {
	StoredRefusal
	Envelope []byte `json:"envelope"`
}

// CampaignVerifier verifies a campaign envelope and returns its order key (a time from its
// signed body, Unix seconds) and the verified value, which the store hands to OnNew with
// the bytes so that no reader verifies the campaign again. The campaign format lives in
// protocol; the store keeps campaigns as opaque verified envelopes.
type CampaignVerifier func(envelope []byte) (orderKey uint64, value any, err error)

// Options configure a Store.
type Options struct {
	// Trust is what attestations are verified under (each certificate at the time its
	// statement claims, as the ledger does). nil: an empty trust store (everything is
	// refused as from an unknown lab until SetTrust).
	Trust *attest.TrustStore
	// VerifyCampaign verifies campaign envelopes; nil refuses every campaign.
	VerifyCampaign CampaignVerifier
	// AdmitCampaign, when set, takes a campaign value its caller verified already
	// (Set.AddVerified: the gossip validator's) under rules that imply VerifyCampaign's,
	// and returns its order key and the envelope's digest (DigestOf, which the verification
	// computed for its ID: the store does not hash the bytes again); ok false (not such a
	// value of envelope) has the envelope hashed and verified as Add does.
	AdmitCampaign func(envelope []byte, value any) (orderKey uint64, digest recon.ID, ok bool)
	// AdmitAttestation, when set, takes an attestation value its caller verified already
	// (Set.AddVerified: the gossip validator's) at its claimed time, as the store verifies,
	// and returns it with the trust store object it was verified under. The store admits it
	// only while that is the object it verifies under (SetTrust changes it); otherwise, and
	// when ok is false, the envelope is verified as Add does.
	AdmitAttestation func(envelope []byte, value any) (v *attest.Verified, trust *attest.TrustStore, ok bool)
	// Clock stamps refusals (default time.Now).
	Clock func() time.Time
	// NoSync skips fsync of commits (benchmarks of many homes on one disk only).
	NoSync bool
}

// Store holds the node's two verified sets.
type Store struct {
	db           *pebble.DB
	attestations *Set
	campaigns    *Set
	wo           *pebble.WriteOptions

	mu    sync.RWMutex
	trust *attest.TrustStore
	clock func() time.Time

	values storeValues
}

// storeValues holds the verified value of every accepted attestation, so that a ledger
// recomputation reads values in memory instead of parsing every envelope again. They are
// those the store verified on arrival, and those of envelopes stored before this process
// (restored once, attest.Restore, on the first call that needs them). Once loaded, every
// envelope committed to the attestations set is in m or refused (keepValues), whatever
// trust store it was verified under. Asking for them under another trust store restores
// them all again: they were checked under the old one.
type storeValues struct {
	mu     sync.Mutex
	loaded bool
	trust  *attest.TrustStore // the trust store they were verified or restored under
	m      map[recon.ID]*attest.Verified
	// refused are the stored envelopes that trust refuses on restoring (a lab removed from
	// the trust file since they arrived): reported by every ledger, as before.
	refused map[recon.ID]attest.Refusal
}

// SetName names one of the store's sets; it is also the set's name on the sync protocol.
type SetName string

const (
	SetAttestations SetName = api.SetAttestations
	SetCampaigns    SetName = api.SetCampaigns
)

// Open opens (creating) the store in dir and loads its order index.
func Open(dir string, o Options) (*Store, error) { return openTweaked(dir, o, nil) }

// openTweaked is Open; tweak, when set, edits the pebble options last (the tests use
// it to make a store as an earlier evalmesh wrote it).
func openTweaked(dir string, o Options, tweak func(*pebble.Options)) (*Store, error) {
	// Bloom filters make the "already stored?" lookup of every arriving envelope cheap when
	// it is new (most of a sync), and a block cache larger than pebble's 8 MiB default keeps
	// a serving node's reads off the disk.
	cache := pebble.NewCache(64 << 20)
	defer cache.Unref()
	po := &pebble.Options{Logger: quietPebble{}, Cache: cache}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Envelopes (~2.4 KB, written once, never updated) are kept out of the LSM tree in
	// pebble's blob files (value separation, which needs the columnar format: an older store
	// is ratcheted to it when it opens), so compactions move keys and value handles, not
	// the envelopes: a late joiner's 100,000-envelope session spent 26% of both nodes' CPU
	// in the receiving store's compactions without it and 6% with it (bench/sync.sh). Larger
	// blocks and memtables make the serving side's sweep of a fetch batch (Set.GetMany) and
	// the flushes fewer, larger I/Os.
	po.FormatMajorVersion = pebble.FormatValueSeparation
	po.MemTableSize = 32 << 20
	for i := range po.Levels {
		po.Levels[i].BlockSize = 32 << 10
	}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 512, MaxBlobReferenceDepth: 10,
			RewriteMinimumAge: 10 * time.Minute, TargetGarbageRatio: 0.2}
	}
	if tweak != nil {
		tweak(po)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open attestation store %s: %w (is another evalmesh daemon using this home?)", dir, err)
	}
	s := &Store{db: db, trust: o.Trust, clock: o.Clock, wo: pebble.Sync}
	if o.NoSync {
		s.wo = pebble.NoSync
	}
	if s.trust == nil {
		s.trust = attest.NewTrustStore()
	}
	if s.clock == nil {
		s.clock = time.Now // wall clock: the default where no Clock is given (node passes its own)
	}
	s.attestations = &Set{st: s, name: SetAttestations, prefix: 'a', verify: s.verifyAttestations}
	vc := o.VerifyCampaign
	s.campaigns = &Set{st: s, name: SetCampaigns, prefix: 'c', verify: func(envs [][]byte) []verdict {
		out := make([]verdict, len(envs))
		for i, e := range envs {
			if vc == nil {
				out[i].err = errors.New("this node has no campaign verifier")
				continue
			}
			out[i].time, out[i].value, out[i].err = vc(e)
		}
		return out
	}}
	if aa := o.AdmitAttestation; aa != nil {
		s.attestations.admit = func(env []byte, value any) (verdict, recon.ID, bool) {
			v, trust, ok := aa(env, value)
			// The object, not equal contents: a verdict under another trust store (the
			// home's before the mesh's SetTrust) is not this store's, and the kept values
			// are keyed by the object (keepValues).
			if !ok || v == nil || trust == nil || trust != s.Trust() {
				return verdict{}, recon.ID{}, false
			}
			return verdict{time: orderTime(v), value: v, trust: trust}, DigestOf(env), true
		}
	}
	if ac := o.AdmitCampaign; ac != nil {
		s.campaigns.admit = func(env []byte, value any) (verdict, recon.ID, bool) {
			t, id, ok := ac(env, value)
			return verdict{time: t, value: value}, id, ok
		}
	}
	for _, set := range []*Set{s.attestations, s.campaigns} {
		if err := set.load(); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// Compact compacts the whole store into its bottom level, the shape a long-running node's
// store settles into; benchmarks call it after loading a store so that the loading's
// compactions are not timed as part of the session that follows.
func (s *Store) Compact() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

// Close closes the database; every Add that returned is on disk.
func (s *Store) Close() error { return s.db.Close() }

// Attestations is the set of verified attestation envelopes.
func (s *Store) Attestations() *Set { return s.attestations }

// Campaigns is the set of verified campaign envelopes.
func (s *Store) Campaigns() *Set { return s.campaigns }

// Set returns the set called name, or nil.
func (s *Store) Set(name SetName) *Set {
	switch name {
	case SetAttestations:
		return s.attestations
	case SetCampaigns:
		return s.campaigns
	}
	return nil
}

// SetTrust replaces the trust store new attestations are verified under. Stored envelopes
// keep their verdict; the ledger re-applies the trust policy (not the signature check).
func (s *Store) SetTrust(t *attest.TrustStore) {
	s.mu.Lock()
	s.trust = t
	s.mu.Unlock()
}

// Values returns the verified value of every accepted attestation, in ID order (the order
// Each gives), checked under trust: those verified on arrival as they are, the rest (a
// restart, or a new trust store) restored from their bytes once and kept. refused are the
// stored envelopes trust no longer accepts. The values are shared: callers must not modify
// them.
func (s *Store) Values(trust *attest.TrustStore) (vs []*attest.Verified, refused []attest.Refusal, err error) {
	sv := &s.values
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if !sv.loaded || sv.trust != trust {
		m := map[recon.ID]*attest.Verified{}
		ref := map[recon.ID]attest.Refusal{}
		if err := s.attestations.Each(func(id recon.ID, env []byte) error {
			v, err := attest.Restore(env, trust)
			if err != nil {
				ref[id] = storeRefusal(attest.EnvelopeIDOfDigest(id), err)
				return nil
			}
			m[id] = v
			return nil
		}); err != nil {
			return nil, nil, err
		}
		sv.m, sv.refused, sv.trust, sv.loaded = m, ref, trust, true
	}
	vs = make([]*attest.Verified, 0, len(sv.m))
	for _, id := range sortedIDs(sv.m) {
		vs = append(vs, sv.m[id])
	}
	if len(sv.refused) > 0 {
		refused = make([]attest.Refusal, 0, len(sv.refused))
		for _, id := range sortedIDs(sv.refused) {
			refused = append(refused, sv.refused[id])
		}
	}
	return vs, refused, nil
}

func sortedIDs[V any](m map[recon.ID]V) []recon.ID {
	ids := make([]recon.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b recon.ID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// keepValues records the values of attestations just committed (envs[k] is ids[k] and
// vs[k]), verified under trust. Before the first Values call nothing is kept: that call
// reads them from the store. Values verified under another trust store than the kept ones
// are restored from their bytes under the kept one (attest.Restore: no signature checked
// again), not dropped: their envelopes are in the set now, and a ledger over values that
// lack them counts part of the store. That was the case when a restarted daemon's sync
// batch, verified under HOME/trust.yaml (node.New), committed after the mesh had switched
// the store to the network's trust store and read the values (NewMesh): its ledger
// counted 3 of 18 runs (TestFaultKillNodeMidCampaign).
func (s *Store) keepValues(trust *attest.TrustStore, ids []recon.ID, envs [][]byte, vs []*attest.Verified) {
	sv := &s.values
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if !sv.loaded {
		return
	}
	for k, id := range ids {
		v := vs[k]
		if sv.trust != trust {
			var err error
			if v, err = attest.Restore(envs[k], sv.trust); err != nil {
				delete(sv.m, id)
				sv.refused[id] = storeRefusal(attest.EnvelopeIDOfDigest(id), err)
				continue
			}
		}
		delete(sv.refused, id)
		sv.m[id] = v
	}
}

// Trust is the trust store in use.
func (s *Store) Trust() *attest.TrustStore {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.trust
}

type verdict struct {
	time  uint64
	value any // the verified value: *attest.Verified, or what the CampaignVerifier returned
	err   error
	trust *attest.TrustStore // what an attestation was verified under
}

// verifyAttestations checks a batch at the claimed time (the ledger's mode, a function of
// the bytes and trust store only), split over the CPUs.
func (s *Store) verifyAttestations(envs [][]byte) []verdict {
	trust := s.Trust()
	out := make([]verdict, len(envs))
	parts := min(runtime.GOMAXPROCS(0), (len(envs)+63)/64)
	if parts < 1 {
		parts = 1
	}
	var wg sync.WaitGroup
	per := (len(envs) + parts - 1) / parts
	for p := 0; p < parts; p++ {
		lo, hi := p*per, min(len(envs), (p+1)*per)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			vs, errs := attest.VerifyBatchWith(envs[lo:hi], trust, attest.VerifyOptions{AtClaimedTime: true})
			for i := range vs {
				if errs[i] != nil {
					out[lo+i].err = errs[i]
					continue
				}
				out[lo+i].time, out[lo+i].value, out[lo+i].trust = orderTime(vs[i]), vs[i], trust
			}
		}()
	}
	wg.Wait()
	return out
}

// orderTime is an attestation's order key: the time its statement claims, Unix seconds
// (0 when it claims none or one before 1970).
func orderTime(v *attest.Verified) uint64 {
	t, ok := v.ClaimedTime()
	if !ok || t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

// Ledger computes the ledger from the verified values of the stored attestations (Values):
// no envelope is parsed and no signature checked again, only the trust policy re-applied
// (attest.TrustStore.Recheck). in.Trust, when nil, is the store's. in.Envelopes is not used.
func (s *Store) Ledger(in attest.LedgerInput) (*scoring.Ledger, *attest.LedgerReport, error) {
	if in.Trust == nil {
		in.Trust = s.Trust()
	}
	vs, refused, err := s.Values(in.Trust)
	if err != nil {
		return nil, nil, err
	}
	kept := make([]*attest.Verified, 0, len(vs))
	for _, v := range vs {
		if err := in.Trust.Recheck(v); err != nil {
			refused = append(refused, storeRefusal(v.ID, err))
			continue
		}
		kept = append(kept, v)
	}
	return ledgerOfValues(kept, refused, in)
}

// storeRefusal is the report's line for a stored envelope the trust policy now refuses.
func storeRefusal(id string, err error) attest.Refusal {
	r := attest.Refusal{File: "store", ID: id, Reason: err.Error()}
	var ve *attest.VerifyError
	if errors.As(err, &ve) {
		r.Reason, r.Detail = string(ve.Reason), ve.Detail
	}
	return r
}

// ledgerOfValues is attest.LedgerFromVerified with the stored envelopes refused on the way
// added to the report.
func ledgerOfValues(vs []*attest.Verified, refused []attest.Refusal, in attest.LedgerInput) (*scoring.Ledger, *attest.LedgerReport, error) {
	l, rep, err := attest.LedgerFromVerified(vs, in)
	if rep != nil {
		rep.Read += len(refused)
		rep.Refused = append(rep.Refused, refused...)
	}
	return l, rep, err
}

// LedgerFromStored is the ledger of envelopes a store accepted (its own, or a daemon's
// through the API): each is restored with attest.Restore (no signature check, the trust
// policy re-applied at its claimed time) and the rest is attest.LedgerFromVerified. An
// envelope the trust policy now refuses (a lab removed, a revocation since) is a Refusal in
// the report, as in attest.BuildLedger. in.Envelopes is not used.
func LedgerFromStored(envs [][]byte, in attest.LedgerInput) (*scoring.Ledger, *attest.LedgerReport, error) {
	if in.Trust == nil {
		return nil, nil, errors.New("ledger from stored envelopes needs a trust store")
	}
	vs := make([]*attest.Verified, 0, len(envs))
	var refused []attest.Refusal
	for _, env := range envs {
		v, err := attest.Restore(env, in.Trust)
		if err != nil {
			refused = append(refused, storeRefusal(attest.EnvelopeID(env), err))
			continue
		}
		vs = append(vs, v)
	}
	return ledgerOfValues(vs, refused, in)
}

// Set is one verified set of envelopes: its records in pebble and its reconciliation index
// in memory. Safe for concurrent use.
type Set struct {
	st     *Store
	name   SetName
	prefix byte
	verify func([][]byte) []verdict
	// admit takes a value its caller verified (AddVerified); nil verifies every envelope.
	admit func(envelope []byte, value any) (verdict, recon.ID, bool)

	mu      sync.RWMutex
	index   *recon.Index
	refused int
	onNew   []func(src Source, news []Accepted)
	addMu   sync.Mutex // one writer batch at a time (verification runs outside it)
	// verified counts the envelopes this set verified itself (Verifications).
	verified atomic.Uint64
}

func (set *Set) key(kind byte, rest ...[]byte) []byte {
	k := []byte{set.prefix, kind}
	for _, r := range rest {
		k = append(k, r...)
	}
	return k
}

func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	end[len(end)-1]++
	return end
}

func (set *Set) load() error {
	var items []recon.Item
	lo := set.key('o')
	it, err := set.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[2:]
		if len(k) != 8+recon.IDSize {
			it.Close()
			return fmt.Errorf("attestation store: order key of %d bytes under %q (the store is damaged: move HOME/store away and resync)", len(k), set.name)
		}
		var item recon.Item
		item.Time = binary.BigEndian.Uint64(k)
		copy(item.ID[:], k[8:])
		items = append(items, item)
	}
	if err := it.Close(); err != nil {
		return err
	}
	n := 0
	rlo := set.key('r')
	it, err = set.st.db.NewIter(&pebble.IterOptions{LowerBound: rlo, UpperBound: prefixEnd(rlo)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		return err
	}
	set.index = recon.NewIndex(items)
	set.refused = n
	return nil
}

// Verifications is how many envelopes the set has verified itself since it opened: not
// those known or refused before, nor those admitted with their caller's value
// (AddVerified). It shows whether an envelope was verified twice on its way in.
func (set *Set) Verifications() uint64 { return set.verified.Load() }

// Name is the set's name.
func (set *Set) Name() SetName { return set.name }

// Len is the number of accepted envelopes.
func (set *Set) Len() int {
	set.mu.RLock()
	defer set.mu.RUnlock()
	return set.index.Len()
}

// RefusedLen is the number of refused envelopes kept.
func (set *Set) RefusedLen() int {
	set.mu.RLock()
	defer set.mu.RUnlock()
	return set.refused
}

// Fingerprint is the reconciliation fingerprint of the whole set.
func (set *Set) Fingerprint() recon.Fingerprint {
	set.mu.RLock()
	defer set.mu.RUnlock()
	return set.index.Fingerprint(0, set.index.Len())
}

// View runs fn with the reconciliation index read-locked (one reconciliation step).
func (set *Set) View(fn func(recon.Storage)) {
	set.mu.RLock()
	defer set.mu.RUnlock()
	fn(set.index)
}

// Accepted is one envelope a set accepted, with the value its verification made:
// *attest.Verified for attestations, what the CampaignVerifier returned for campaigns. Readers
// take the value instead of decoding and verifying the bytes again.
type Accepted struct {
	Envelope []byte
	Value    any
}

// OnNew registers fn to be called with every batch of newly accepted envelopes (after they
// are on disk), e.g. to forward them on gossip. Refused envelopes never reach it.
func (set *Set) OnNew(fn func(src Source, news []Accepted)) {
	set.mu.Lock()
	set.onNew = append(set.onNew, fn)
	set.mu.Unlock()
}

// Get returns the accepted envelope with this ID.
func (set *Set) Get(id recon.ID) ([]byte, bool, error) {
	v, closer, err := set.st.db.Get(set.key('e', id[:]))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	if len(v) < 9 {
		return nil, false, fmt.Errorf("attestation store: record %x of %q is truncated", id[:6], set.name)
	}
	return bytes.Clone(v[9:]), true, nil
}

// GetMany returns the accepted envelopes of ids, in the order of ids, leaving out those
// not stored, and stops before an envelope once maxBytes (0: no cap) are collected; n is
// how many of ids were looked at. It reads with one pebble iterator: ids sorted by ID (as a
// sync session asks for them) are one forward sweep over the records, each block read once,
// where a Get per ID re-seeks every level (measured: the serving node's Gets were 19% of a
// late joiner's CPU).
func (set *Set) GetMany(ids []recon.ID, maxBytes int) (envs [][]byte, n int, err error) {
	lo := set.key('e')
	it, err := set.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	size := 0
	key := set.key('e', make([]byte, recon.IDSize))
	for n = 0; n < len(ids); n++ {
		if maxBytes > 0 && size >= maxBytes {
			break
		}
		copy(key[2:], ids[n][:])
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, n, err
		}
		if len(v) < 9 {
			return nil, n, fmt.Errorf("attestation store: record %x of %q is truncated", ids[n][:6], set.name)
		}
		envs, size = append(envs, bytes.Clone(v[9:])), size+len(v)-9
	}
	return envs, n, it.Error()
}

// hasMany reports for each of ids whether it is accepted, with one iterator sweeping the
// IDs in sorted order: a Get per ID opened every overlapping table's index (measured: 7%
// of a late joiner's CPU, mostly pread of index blocks), where the sweep reads each block
// once per batch.
func (set *Set) hasMany(ids []recon.ID) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(ids[a][:], ids[b][:]) })
	lo := set.key('e')
	it, err := set.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	key := set.key('e', make([]byte, recon.IDSize))
	for _, i := range order {
		copy(key[2:], ids[i][:])
		out[i] = it.SeekGE(key) && bytes.Equal(it.Key(), key)
	}
	return out, it.Error()
}

// Has reports whether an envelope with this ID is accepted.
func (set *Set) Has(id recon.ID) (bool, error) {
	_, closer, err := set.st.db.Get(set.key('e', id[:]))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// Each calls fn with every accepted envelope, in ID order.
func (set *Set) Each(fn func(id recon.ID, envelope []byte) error) error {
	lo := set.key('e')
	it, err := set.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		var id recon.ID
		copy(id[:], it.Key()[2:])
		v := it.Value()
		if len(v) < 9 {
			return fmt.Errorf("attestation store: record %x of %q is truncated", id[:6], set.name)
		}
		if err := fn(id, bytes.Clone(v[9:])); err != nil {
			return err
		}
	}
	return it.Error()
}

// Refusals lists the refused envelopes kept, sorted by ID.
func (set *Set) Refusals() ([]StoredRefusal, error) {
	lo := set.key('r')
	it, err := set.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := []StoredRefusal{}
	for it.First(); it.Valid(); it.Next() {
		var r refusedRecord
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			return nil, fmt.Errorf("attestation store: refusal record: %w", err)
		}
		out = append(out, r.StoredRefusal)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, it.Error()
}

// DigestOf is an envelope's reconciliation ID: the sha256 of its bytes (the digest inside
// its CID, attest.EnvelopeID).
func DigestOf(envelope []byte) recon.ID { return sum256(envelope) }

// sum256 is sha256.Sum256, a variable so that a test counts the envelopes hashed.
var sum256 = sha256.Sum256

// Add verifies the envelopes that are new (each once: known ones and ones refused for a
// reason of their bytes alone are not verified again) and stores them, accepted or
// refused, in one synced batch. from names the peer or file they came from. results[i] is
// the outcome of envelopes[i].
func (set *Set) Add(envelopes [][]byte, src Source, from string) ([]AddResult, error) {
	ids := make([]recon.ID, len(envelopes))
	for i, e := range envelopes {
		ids[i] = DigestOf(e)
	}
	return set.addDigested(envelopes, ids, nil, src, from)
}

// AddVerified is Add for envelopes that may come with the value their caller verified
// them into (the gossip validator's): an envelope with a value the set admits
// (Options.AdmitCampaign, Options.AdmitAttestation) is stored with it, under the digest the
// admission names, and not verified again (a campaign's is not hashed again either: its
// verification computed it); the others are hashed and verified as Add does.
func (set *Set) AddVerified(items []Accepted, src Source, from string) ([]AddResult, error) {
	envelopes := make([][]byte, len(items))
	admitted := make([]*verdict, len(items))
	ids := make([]recon.ID, len(items))
	for i, it := range items {
		envelopes[i] = it.Envelope
		if it.Value != nil && set.admit != nil {
			if vd, id, ok := set.admit(it.Envelope, it.Value); ok {
				admitted[i], ids[i] = &vd, id
				continue
			}
		}
		ids[i] = DigestOf(it.Envelope)
	}
	return set.addDigested(envelopes, ids, admitted, src, from)
}

// AddDigested is Add with ids[i] = DigestOf(envelopes[i]) already computed (a sync
// session hashes each envelope to match it with its Fetch, and hashing 2.4 KB costs as
// much as a tenth of its verification).
func (set *Set) AddDigested(envelopes [][]byte, ids []recon.ID, src Source, from string) ([]AddResult, error) {
	return set.addDigested(envelopes, ids, nil, src, from)
}

// addDigested is AddDigested; admitted, when not nil, are the verdicts the set's admission
// gave the callers' verified values of the envelopes (AddVerified), admitted[i] nil where
// there is none.
func (set *Set) addDigested(envelopes [][]byte, ids []recon.ID, admitted []*verdict, src Source, from string) ([]AddResult, error) {
	results := make([]AddResult, len(envelopes))
	var fresh []int
	seen := map[recon.ID]bool{}
	wasRefused := map[int]bool{}
	// With no refusal kept (the common case: a late joiner's whole fetch) the per-envelope
	// refusal lookup is skipped; a refusal stored meanwhile by a concurrent Add only costs
	// this one a second verification of the same bytes, with the same verdict.
	set.mu.RLock()
	anyRefused := set.refused > 0
	set.mu.RUnlock()
	stored, err := set.hasMany(ids)
	if err != nil {
		return nil, err
	}
	for i, e := range envelopes {
		results[i].ID = attest.EnvelopeIDOfDigest(ids[i])
		if seen[ids[i]] {
			results[i].Status = StatusKnown
			continue
		}
		seen[ids[i]] = true
		if len(e) > attest.MaxEnvelopeSize {
			results[i].Status, results[i].Reason = StatusRefused, "too large"
			results[i].Detail = fmt.Sprintf("%d bytes, over %d", len(e), attest.MaxEnvelopeSize)
			continue
		}
		if stored[i] {
			results[i].Status = StatusKnown
			continue
		}
		if !anyRefused {
			fresh = append(fresh, i)
			continue
		}
		if r, ok, err := set.refusal(ids[i]); err != nil {
			return nil, err
		} else if ok && attest.Reason(r.Reason).Intrinsic() {
			results[i] = AddResult{ID: results[i].ID, Status: StatusRefused, Reason: r.Reason, Detail: r.Detail}
			continue
		} else if ok {
			wasRefused[i] = true
		}
		fresh = append(fresh, i)
	}
	if len(fresh) == 0 {
		return results, nil
	}
	verdicts := make([]verdict, len(fresh))
	var batch [][]byte
	var batchAt []int // batch[j] is fresh[batchAt[j]]
	for k, i := range fresh {
		if admitted != nil && admitted[i] != nil {
			verdicts[k] = *admitted[i]
			continue
		}
		batch, batchAt = append(batch, envelopes[i]), append(batchAt, k)
	}
	if len(batch) > 0 {
		set.verified.Add(uint64(len(batch)))
		for j, vd := range set.verify(batch) {
			verdicts[batchAt[j]] = vd
		}
	}

	set.addMu.Lock()
	defer set.addMu.Unlock()
	b := set.st.db.NewBatch()
	defer b.Close()
	now := set.st.clock().UTC()
	var accepted []recon.Item
	var acceptedEnv []Accepted
	var acceptedAt []int
	var acceptedTrust []*attest.TrustStore
	for k, i := range fresh {
		vd := verdicts[k]
		id := ids[i]
		if vd.err != nil {
			reason, detail := vd.err.Error(), ""
			var ve *attest.VerifyError
			if errors.As(vd.err, &ve) {
				reason, detail = string(ve.Reason), ve.Detail
			}
			results[i].Status, results[i].Reason, results[i].Detail = StatusRefused, reason, detail
			rec, _ := json.Marshal(refusedRecord{StoredRefusal: StoredRefusal{
				ID: results[i].ID, Reason: reason, Detail: detail, Source: src, From: from, Time: now,
			}, Envelope: envelopes[i]})
			if err := b.Set(set.key('r', id[:]), rec, nil); err != nil {
				return nil, err
			}
			continue
		}
		var tb [8]byte
		binary.BigEndian.PutUint64(tb[:], vd.time)
		val := make([]byte, 0, 9+len(envelopes[i]))
		val = append(append(append(val, tb[:]...), sourceByte(src)), envelopes[i]...)
		if err := b.Set(set.key('e', id[:]), val, nil); err != nil {
			return nil, err
		}
		if err := b.Set(set.key('o', tb[:], id[:]), nil, nil); err != nil {
			return nil, err
		}
		// A refusal for a reason of the trust store that now verifies is no longer one.
		if err := b.Delete(set.key('r', id[:]), nil); err != nil {
			return nil, err
		}
		results[i].Status = StatusNew
		accepted = append(accepted, recon.Item{Time: vd.time, ID: id})
		acceptedEnv = append(acceptedEnv, Accepted{Envelope: envelopes[i], Value: vd.value})
		acceptedAt = append(acceptedAt, i)
		acceptedTrust = append(acceptedTrust, vd.trust)
	}
	if err := b.Commit(set.st.wo); err != nil {
		return nil, fmt.Errorf("attestation store: commit: %w", err)
	}
	set.keepValues(accepted, acceptedEnv, acceptedTrust)
	set.mu.Lock()
	var news []Accepted
	for k, it := range accepted {
		if set.index.Insert(it) {
			news = append(news, acceptedEnv[k])
		} else {
			results[acceptedAt[k]].Status = StatusKnown // a concurrent Add stored it first
		}
	}
	for _, i := range fresh {
		switch {
		case results[i].Status == StatusRefused && !wasRefused[i]:
			set.refused++
		case results[i].Status == StatusNew && wasRefused[i]:
			set.refused--
		}
	}
	hooks := set.onNew
	set.mu.Unlock()
	if len(news) > 0 {
		for _, h := range hooks {
			h(src, news)
		}
	}
	return results, nil
}

// keepValues hands the store the attestation values just committed (accepted[k] is
// news[k], verified under trusts[k]). One batch may mix trust stores: values admitted as
// their caller verified them and the rest verified here, with a SetTrust in between.
func (set *Set) keepValues(accepted []recon.Item, news []Accepted, trusts []*attest.TrustStore) {
	if set != set.st.attestations || len(accepted) == 0 {
		return
	}
	type kept struct {
		ids  []recon.ID
		envs [][]byte
		vs   []*attest.Verified
	}
	var order []*attest.TrustStore
	byTrust := map[*attest.TrustStore]*kept{}
	for k, it := range accepted {
		v, ok := news[k].Value.(*attest.Verified)
		if !ok {
			continue
		}
		g := byTrust[trusts[k]]
		if g == nil {
			g = &kept{}
			byTrust[trusts[k]] = g
			order = append(order, trusts[k])
		}
		g.ids, g.envs, g.vs = append(g.ids, it.ID), append(g.envs, news[k].Envelope), append(g.vs, v)
	}
	for _, t := range order {
		g := byTrust[t]
		set.st.keepValues(t, g.ids, g.envs, g.vs)
	}
}

func (set *Set) refusal(id recon.ID) (StoredRefusal, bool, error) {
	v, closer, err := set.st.db.Get(set.key('r', id[:]))
	if errors.Is(err, pebble.ErrNotFound) {
		return StoredRefusal{}, false, nil
	}
	if err != nil {
		return StoredRefusal{}, false, err
	}
	defer closer.Close()
	var r refusedRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return StoredRefusal{}, false, fmt.Errorf("attestation store: refusal record %x: %w", id[:6], err)
	}
	return r.StoredRefusal, true, nil
}

func sourceByte(s Source) byte {
	switch s {
	case SourceGossip:
		return 'g'
	case SourceSync:
		return 's'
	case SourceLocal:
		return 'l'
	case SourceImport:
		return 'i'
	}
	return '?'
}

// quietPebble drops pebble's informational log lines; errors still reach the caller.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
