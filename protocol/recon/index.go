// Package recon owns range-based set reconciliation (Meyer's method, in the wire format of
// the negentropy protocol v1): two peers each holding a set of (time, ID) items find the IDs
// one has and the other lacks by exchanging fingerprints of sorted ranges, splitting the
// ranges whose fingerprints differ and listing IDs once a range is small.
//
// It is pure: no I/O, no clock. Index is the incremental fingerprint index a node keeps of
// its set; Initiator and Respond are the state machine (inputs in, a struct of actions out);
// the node package carries the messages over a libp2p stream and fetches what is missing.
// docs/protocol-sync.md is the normative text.
//
// Hand-written: no Go implementation of negentropy can be had here.
//
// Concurrency: queries on an Index never write, so they may run concurrently with each
// other, but not with Insert: its owner locks it (the node's store holds a read lock for the
// length of one Step, so items may arrive between rounds). An
// Initiator belongs to one session's goroutine.
package recon

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sort"
)

// IDSize is the size of an item ID: the sha256 digest of the envelope bytes.
const IDSize = 32

// ID identifies an item.
type ID [IDSize]byte

// Item is one element of a set: its order key (a time from the signed statement, in Unix
// seconds) and its ID. Items sort by time, then by ID bytes.
type Item struct {
	Time uint64
	ID   ID
}

// Compare orders items by time, then ID.
func (a Item) Compare(b Item) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Storage is the read view of a set the reconciler needs: items by position in sorted order
// and fingerprints of position ranges. Index implements it.
type Storage interface {
	Len() int
	At(i int) Item
	// LowerBound is the position of the first item not less than b.
	LowerBound(b Item) int
	// Fingerprint of the items at positions [i, j).
	Fingerprint(i, j int) Fingerprint
}

// FingerprintSize is the size of a range fingerprint on the wire.
const FingerprintSize = 16

// Fingerprint is the first 16 bytes of sha256(sum of the IDs as little-endian 256-bit
// integers mod 2^256, then the item count as a varint).
type Fingerprint [FingerprintSize]byte

// acc is a sum of IDs mod 2^256, as four little-endian 64-bit limbs.
type acc [4]uint64

func (a *acc) add(id *ID) {
	var carry uint64
	for k := 0; k < 4; k++ {
		v := binary.LittleEndian.Uint64(id[k*8:])
		s := a[k] + v
		c1 := s < v
		s2 := s + carry
		c2 := s2 < s
		a[k] = s2
		carry = 0
		if c1 || c2 {
			carry = 1
		}
	}
}

func (a *acc) fingerprint(count int) Fingerprint {
	var buf [IDSize + 10]byte
	for k := 0; k < 4; k++ {
		binary.LittleEndian.PutUint64(buf[k*8:], a[k])
	}
	n := copy(buf[IDSize:], appendVarint(nil, uint64(count)))
	sum := sha256.Sum256(buf[:IDSize+n])
	var f Fingerprint
	copy(f[:], sum[:])
	return f
}

// FingerprintOf computes the fingerprint of items directly (tests, and the reference the
// index is checked against).
func FingerprintOf(items []Item) Fingerprint {
	var a acc
	for i := range items {
		a.add(&items[i].ID)
	}
	return a.fingerprint(len(items))
}

// chunkMax is the most items one chunk holds before it splits in two.
const chunkMax = 1024

type chunk struct {
	items []Item
	sum   acc
}

// Index is a sorted set of items kept in chunks of at most chunkMax, each with the sum of
// its IDs. An insert touches one chunk; a fingerprint of any range costs the sums of the
// chunks it covers plus at most two partial chunks, so no query scans the set.
type Index struct {
	chunks []*chunk
	n      int
	// starts[i] is the position of chunks[i]'s first item, kept current by Insert (O(chunks)
	// increments), so queries never write and may run concurrently.
	starts []int
}

// NewIndex builds an index from items in any order (duplicates dropped).
func NewIndex(items []Item) *Index {
	s := slices.Clone(items)
	slices.SortFunc(s, Item.Compare)
	s = slices.CompactFunc(s, func(a, b Item) bool { return a == b })
	x := &Index{}
	for len(s) > 0 {
		k := min(len(s), chunkMax/2)
		c := &chunk{items: slices.Clone(s[:k])}
		for i := range c.items {
			c.sum.add(&c.items[i].ID)
		}
		x.chunks = append(x.chunks, c)
		x.starts = append(x.starts, x.n)
		x.n += k
		s = s[k:]
	}
	return x
}

// Len is the number of items.
func (x *Index) Len() int { return x.n }

// Insert adds it; it reports false when it was already there.
func (x *Index) Insert(it Item) bool {
	if len(x.chunks) == 0 {
		c := &chunk{items: []Item{it}}
		c.sum.add(&it.ID)
		x.chunks, x.starts = []*chunk{c}, []int{0}
		x.n = 1
		return true
	}
	// The first chunk whose last item is >= it, or the last chunk.
	ci := sort.Search(len(x.chunks), func(i int) bool {
		c := x.chunks[i]
		return c.items[len(c.items)-1].Compare(it) >= 0
	})
	if ci == len(x.chunks) {
		ci--
	}
	c := x.chunks[ci]
	pos, found := slices.BinarySearchFunc(c.items, it, Item.Compare)
	if found {
		return false
	}
	c.items = slices.Insert(c.items, pos, it)
	c.sum.add(&it.ID)
	x.n++
	for k := ci + 1; k < len(x.starts); k++ {
		x.starts[k]++
	}
	if len(c.items) > chunkMax {
		half := len(c.items) / 2
		right := &chunk{items: slices.Clone(c.items[half:])}
		c.items = slices.Clip(c.items[:half])
		c.sum, right.sum = acc{}, acc{}
		for i := range c.items {
			c.sum.add(&c.items[i].ID)
		}
		for i := range right.items {
			right.sum.add(&right.items[i].ID)
		}
		x.chunks = slices.Insert(x.chunks, ci+1, right)
		x.starts = slices.Insert(x.starts, ci+1, x.starts[ci]+half)
	}
	return true
}

// Has reports whether it is in the index.
func (x *Index) Has(it Item) bool {
	i := x.LowerBound(it)
	return i < x.n && x.At(i) == it
}

// locate returns the chunk holding position i (0 <= i < Len) and the offset in it.
func (x *Index) locate(i int) (int, int) {
	ci := sort.Search(len(x.starts), func(k int) bool { return x.starts[k] > i }) - 1
	return ci, i - x.starts[ci]
}

// At is the item at position i.
func (x *Index) At(i int) Item {
	ci, off := x.locate(i)
	return x.chunks[ci].items[off]
}

// LowerBound is the position of the first item not less than b (Len if none).
func (x *Index) LowerBound(b Item) int {
	ci := sort.Search(len(x.chunks), func(i int) bool {
		c := x.chunks[i]
		return c.items[len(c.items)-1].Compare(b) >= 0
	})
	if ci == len(x.chunks) {
		return x.n
	}
	off, _ := slices.BinarySearchFunc(x.chunks[ci].items, b, Item.Compare)
	return x.starts[ci] + off
}

// Fingerprint of positions [i, j).
func (x *Index) Fingerprint(i, j int) Fingerprint {
	var a acc
	if j <= i {
		return a.fingerprint(0)
	}
	ci, off := x.locate(i)
	left := j - i
	for left > 0 {
		c := x.chunks[ci]
		if off == 0 && len(c.items) <= left {
			a.addLimbs(c.sum)
			left -= len(c.items)
		} else {
			end := min(len(c.items), off+left)
			for k := off; k < end; k++ {
				a.add(&c.items[k].ID)
			}
			left -= end - off
		}
		ci, off = ci+1, 0
	}
	return a.fingerprint(j - i)
}

func (a *acc) addLimbs(b acc) {
	var carry uint64
	for k := 0; k < 4; k++ {
		s := a[k] + b[k]
		c1 := s < b[k]
		s2 := s + carry
		c2 := s2 < s
		a[k] = s2
		carry = 0
		if c1 || c2 {
			carry = 1
		}
	}
}

// Items returns every item in order (tests and small sets).
func (x *Index) Items() []Item {
	out := make([]Item, 0, x.n)
	for _, c := range x.chunks {
		out = append(out, c.items...)
	}
	return out
}
