package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/scoring"
)

// The verified store: every attestation and campaign envelope this node accepted, each
// verified once on arrival (gossip, sync, a local run, a file import) and kept with its ID,
// its verdict and an order key from its signed statement; refused envelopes are kept apart
// with their reason and never served or forwarded.
//
// It is its own pebble database under HOME/store, not a prefix of HOME/datastore: that one
// belongs to the pinner behind go-datastore and syncs every single write, while the store
// commits a whole sync batch (a thousand envelopes) in one synced pebble batch and reads its
// order keys by raw prefix iteration when it opens.
//
// Keys, per set (set byte 'a' attestations, 'c' campaigns):
//
//	set 'e' ID(32)          → time(8, big-endian) source(1) envelope bytes   accepted
//	set 'o' time(8) ID(32)  → empty                                          order index
//	set 'r' ID(32)          → JSON refusedRecord                             refused
//
// Opening reads only the order index into memory (the reconciliation index): nothing is
// verified again after a restart.

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
// signed body, Unix seconds). The campaign format lives in protocol; the store keeps
// campaigns as opaque verified envelopes.
type CampaignVerifier func(envelope []byte) (orderKey uint64, err error)

// StoreOptions configure a Store.
type StoreOptions struct {
	// Trust is what attestations are verified under (each certificate at the time its
	// statement claims, as the ledger does). nil: an empty trust store (everything is
	// refused as from an unknown lab until SetTrust).
	Trust *attest.TrustStore
	// VerifyCampaign verifies campaign envelopes; nil refuses every campaign.
	VerifyCampaign CampaignVerifier
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
}

// SetName names one of the store's sets; it is also the set's name on the sync protocol.
type SetName string

const (
	SetAttestations SetName = "attestations"
	SetCampaigns    SetName = "campaigns"
)

// OpenStore opens (creating) the store in dir and loads its order index.
func OpenStore(dir string, o StoreOptions) (*Store, error) { return openStoreTweaked(dir, o, nil) }

// openStoreTweaked is OpenStore; tweak, when set, edits the pebble options last (the tests use
// it to make a store as an earlier evalmesh wrote it).
func openStoreTweaked(dir string, o StoreOptions, tweak func(*pebble.Options)) (*Store, error) {
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
		s.clock = time.Now
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
			out[i].time, out[i].err = vc(e)
		}
		return out
	}}
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

// Trust is the trust store in use.
func (s *Store) Trust() *attest.TrustStore {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.trust
}

type verdict struct {
	time uint64
	err  error
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
				out[lo+i].time = orderTime(vs[i])
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

// Ledger computes the ledger from the stored attestations without verifying a signature
// again (LedgerFromStored). in.Trust, when nil, is the store's.
func (s *Store) Ledger(in attest.LedgerInput) (*scoring.Ledger, *attest.LedgerReport, error) {
	if in.Trust == nil {
		in.Trust = s.Trust()
	}
	var envs [][]byte
	if err := s.attestations.Each(func(_ recon.ID, env []byte) error {
		envs = append(envs, env)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return LedgerFromStored(envs, in)
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
			r := attest.Refusal{File: "store", ID: attest.EnvelopeID(env), Reason: err.Error()}
			var ve *attest.VerifyError
			if errors.As(err, &ve) {
				r.Reason, r.Detail = string(ve.Reason), ve.Detail
			}
			refused = append(refused, r)
			continue
		}
		vs = append(vs, v)
	}
	l, rep, err := attest.LedgerFromVerified(vs, in)
	if rep != nil {
		rep.Read += len(refused)
		rep.Refused = append(rep.Refused, refused...)
	}
	return l, rep, err
}

// Set is one verified set of envelopes: its records in pebble and its reconciliation index
// in memory. Safe for concurrent use.
type Set struct {
	st     *Store
	name   SetName
	prefix byte
	verify func([][]byte) []verdict

	mu      sync.RWMutex
	index   *recon.Index
	refused int
	onNew   []func(src Source, envelopes [][]byte)
	addMu   sync.Mutex // one writer batch at a time (verification runs outside it)
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

// OnNew registers fn to be called with every batch of newly accepted envelopes (after they
// are on disk), e.g. to forward them on gossip. Refused envelopes never reach it.
func (set *Set) OnNew(fn func(src Source, envelopes [][]byte)) {
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
func DigestOf(envelope []byte) recon.ID { return sha256.Sum256(envelope) }

// Add verifies the envelopes that are new (each once: known ones and ones refused for a
// reason of their bytes alone are not verified again) and stores them, accepted or
// refused, in one synced batch. from names the peer or file they came from. results[i] is
// the outcome of envelopes[i].
func (set *Set) Add(envelopes [][]byte, src Source, from string) ([]AddResult, error) {
	ids := make([]recon.ID, len(envelopes))
	for i, e := range envelopes {
		ids[i] = DigestOf(e)
	}
	return set.addDigested(envelopes, ids, src, from)
}

// addDigested is Add with ids[i] = DigestOf(envelopes[i]) already computed (a sync
// session hashes each envelope to match it with its Fetch, and hashing 2.4 KB costs as
// much as a tenth of its verification).
func (set *Set) addDigested(envelopes [][]byte, ids []recon.ID, src Source, from string) ([]AddResult, error) {
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
	batch := make([][]byte, len(fresh))
	for k, i := range fresh {
		batch[k] = envelopes[i]
	}
	verdicts := set.verify(batch)

	set.addMu.Lock()
	defer set.addMu.Unlock()
	b := set.st.db.NewBatch()
	defer b.Close()
	now := set.st.clock().UTC()
	var accepted []recon.Item
	var acceptedEnv [][]byte
	var acceptedAt []int
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
		acceptedEnv = append(acceptedEnv, envelopes[i])
		acceptedAt = append(acceptedAt, i)
	}
	if err := b.Commit(set.st.wo); err != nil {
		return nil, fmt.Errorf("attestation store: commit: %w", err)
	}
	set.mu.Lock()
	var news [][]byte
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

func loadHomeTrust(h home.Home) (*attest.TrustStore, error) {
	if _, err := os.Stat(h.TrustPath()); errors.Is(err, os.ErrNotExist) {
		return attest.NewTrustStore(), nil
	}
	return attest.LoadTrust(h.TrustPath())
}

// Store is the node's verified attestation and campaign store.
func (n *Node) Store() *Store { return n.vstore }

// importLocalRuns puts the envelopes this node's own runs wrote to HOME/attestations into
// the store (source local). Envelopes already stored cost a hash and a lookup, not a
// verification, so doing it at every start loses no run finished while the daemon was down.
func (n *Node) importLocalRuns() error {
	dir := n.home.AttestationsDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	files, _, err := attest.ReadEnvelopeDir(dir)
	if err != nil {
		return err
	}
	for lo := 0; lo < len(files); lo += 1000 {
		part := files[lo:min(len(files), lo+1000)]
		envs := make([][]byte, len(part))
		for i, f := range part {
			envs[i] = f.Data
		}
		res, err := n.vstore.Attestations().Add(envs, SourceLocal, "")
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.Status == StatusRefused {
				n.opts.Logf("local attestation %s refused: %s %s", part[i].Name, r.Reason, r.Detail)
			}
		}
	}
	return nil
}
