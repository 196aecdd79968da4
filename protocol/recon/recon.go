package recon

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ProtocolVersion is the first byte of every message (negentropy v1).
const ProtocolVersion = 0x61

// Range modes.
const (
	ModeSkip        = 0
	ModeFingerprint = 1
	ModeIDList      = 2
)

// Limits bound what one message may hold and make a session finish.
type Limits struct {
	// FrameSize is the most bytes a message we write may take (the rest of the range is
	// then sent as one fingerprint, answered in a later round). 0: DefaultFrameSize.
	FrameSize int
	// MaxIDListReply is the most IDs a responder lists for one range in reply to an ID
	// list; a larger range is answered with bucket fingerprints instead. 0: 8192.
	MaxIDListReply int
}

const (
	// DefaultFrameSize is the largest message this implementation writes.
	DefaultFrameSize = 4 << 20
	// MaxMessageSize is the largest message a reader accepts (DefaultFrameSize plus one
	// range that began before the limit was reached).
	MaxMessageSize = 8 << 20
	// MinFrameSize is the smallest frame limit honoured (negentropy's minimum).
	MinFrameSize = 4096
	buckets      = 16
)

func (l Limits) frame() int {
	if l.FrameSize <= 0 {
		return DefaultFrameSize
	}
	return max(l.FrameSize, MinFrameSize)
}

func (l Limits) idListReply() int {
	if l.MaxIDListReply <= 0 {
		return 8192
	}
	return max(l.MaxIDListReply, 2*buckets)
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed reconciliation message")

// ErrVersion is returned for a message whose first byte is not ProtocolVersion.
var ErrVersion = errors.New("unsupported reconciliation protocol version")

// infinity is the upper bound of the whole set.
var infinity = Item{Time: math.MaxUint64}

// Actions is what one step asks of its caller.
type Actions struct {
	// Send is the next message for the peer; nil when the session is done.
	Send []byte
	// Have lists IDs we hold and the peer lacks; Need lists IDs the peer holds and we lack.
	Have, Need []ID
	// Done: reconciliation finished; Have and Need of every step together are the
	// difference between the sets (as they stood while each range was compared).
	Done bool
}

// Initiator is the side that opens a session and learns the difference.
type Initiator struct {
	lim   Limits
	round int
	// reported holds every ID already returned in Have or Need: when a responder cuts a
	// reply at its frame limit, the rest-of-set fingerprint it sends may reopen ranges an
	// earlier round settled, and their IDs must not be reported twice.
	reported map[ID]struct{}
}

// NewInitiator starts a session.
func NewInitiator(lim Limits) *Initiator { return &Initiator{lim: lim, reported: map[ID]struct{}{}} }

func (r *Initiator) fresh(ids []ID) []ID {
	out := ids[:0]
	for _, id := range ids {
		if _, ok := r.reported[id]; !ok {
			r.reported[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

// Rounds is the number of replies stepped so far (round trips, when done).
func (r *Initiator) Rounds() int { return r.round }

// Initiate is the first message: the whole set as bucket fingerprints (or its IDs when small).
func (r *Initiator) Initiate(s Storage) []byte {
	w := newWriter(r.lim.frame())
	w.splitRange(s, 0, s.Len(), infinity)
	return w.buf.Bytes()
}

// Step processes the peer's reply.
func (r *Initiator) Step(s Storage, msg []byte) (Actions, error) {
	r.round++
	out, have, need, err := process(s, msg, true, r.lim)
	if err != nil {
		return Actions{}, err
	}
	a := Actions{Have: r.fresh(have), Need: r.fresh(need)}
	if len(out) <= 1 {
		a.Done = true
	} else {
		a.Send = out
	}
	return a, nil
}

// Respond is the responder's whole state machine: each message is answered on its own.
// A reply of only the version byte tells the initiator every range matched.
func Respond(s Storage, msg []byte, lim Limits) ([]byte, error) {
	if len(msg) > 0 && msg[0] != ProtocolVersion {
		// Version negotiation: answer with ours, and the initiator sees it cannot go on.
		return []byte{ProtocolVersion}, fmt.Errorf("%w 0x%02x (this node speaks 0x%02x)", ErrVersion, msg[0], ProtocolVersion)
	}
	out, _, _, err := process(s, msg, false, lim)
	return out, err
}

// process is negentropy's reconcile step for either role.
func process(s Storage, msg []byte, initiator bool, lim Limits) (out []byte, have, need []ID, err error) {
	d := &reader{b: msg}
	v, ok := d.byte()
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if v != ProtocolVersion {
		return nil, nil, nil, fmt.Errorf("%w 0x%02x", ErrVersion, v)
	}
	w := newWriter(lim.frame())
	prevIndex := 0
	prevBound := Item{}
	skip := false
	doSkip := func() {
		if skip {
			skip = false
			w.bound(prevBound)
			w.varint(ModeSkip)
		}
	}
	for !d.empty() {
		cur, err := d.bound()
		if err != nil {
			return nil, nil, nil, err
		}
		if cur.Compare(prevBound) < 0 {
			return nil, nil, nil, fmt.Errorf("%w: bounds out of order", ErrMalformed)
		}
		mode, ok := d.varint()
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: truncated mode", ErrMalformed)
		}
		lower := prevIndex
		upper := max(lower, s.LowerBound(cur))
		mark, markTime, skipBefore := w.buf.Len(), w.lastTime, skip
		switch mode {
		case ModeSkip:
			skip = true
		case ModeFingerprint:
			fb, ok := d.take(FingerprintSize)
			if !ok {
				return nil, nil, nil, fmt.Errorf("%w: truncated fingerprint", ErrMalformed)
			}
			if ours := s.Fingerprint(lower, upper); !bytes.Equal(fb, ours[:]) {
				doSkip()
				w.splitRange(s, lower, upper, cur)
			} else {
				skip = true
			}
		case ModeIDList:
			n, ok := d.varint()
			if !ok || n > uint64(d.left()/IDSize) {
				return nil, nil, nil, fmt.Errorf("%w: ID list count", ErrMalformed)
			}
			theirs := make(map[ID]struct{}, n)
			for k := uint64(0); k < n; k++ {
				b, _ := d.take(IDSize)
				theirs[ID(b)] = struct{}{}
			}
			for i := lower; i < upper; i++ {
				id := s.At(i).ID
				if _, ok := theirs[id]; ok {
					delete(theirs, id)
				} else if initiator {
					have = append(have, id)
				}
			}
			if initiator {
				skip = true
				for id := range theirs {
					need = append(need, id)
				}
				sortIDs(need)
			} else {
				doSkip()
				if upper-lower > lim.idListReply() {
					w.splitRange(s, lower, upper, cur)
				} else {
					w.idList(s, lower, upper, cur)
				}
			}
		default:
			return nil, nil, nil, fmt.Errorf("%w: unknown mode %d", ErrMalformed, mode)
		}
		if w.buf.Len() > w.limit && mark > 1 {
			// Over the frame limit: drop this range's output and send the rest of the set,
			// from this range on, as one fingerprint for a later round. The first range of
			// a message is always kept, so every round makes progress.
			w.buf.Truncate(mark)
			w.lastTime = markTime
			if skipBefore {
				w.bound(prevBound)
				w.varint(ModeSkip)
			}
			w.bound(infinity)
			w.varint(ModeFingerprint)
			fp := s.Fingerprint(lower, s.Len())
			w.buf.Write(fp[:])
			return w.buf.Bytes(), have, need, nil
		}
		prevIndex, prevBound = upper, cur
	}
	return w.buf.Bytes(), have, need, nil
}

// writer builds one message. Timestamps are delta-encoded against the previous bound of
// the same message.
type writer struct {
	buf      bytes.Buffer
	limit    int
	lastTime uint64
}

func newWriter(limit int) *writer {
	w := &writer{limit: limit}
	w.buf.WriteByte(ProtocolVersion)
	return w
}

func (w *writer) varint(n uint64) { w.buf.Write(appendVarint(nil, n)) }

func (w *writer) bound(b Item) {
	if b.Time == math.MaxUint64 {
		w.lastTime = math.MaxUint64
		w.varint(0)
	} else {
		delta := b.Time - w.lastTime
		w.lastTime = b.Time
		w.varint(delta + 1)
	}
	// An upper bound's ID is trimmed to the bytes that separate it from the item before.
	n := IDSize
	for n > 0 && b.ID[n-1] == 0 {
		n--
	}
	w.varint(uint64(n))
	w.buf.Write(b.ID[:n])
}

func (w *writer) idList(s Storage, lower, upper int, ub Item) {
	w.bound(ub)
	w.varint(ModeIDList)
	w.varint(uint64(upper - lower))
	for i := lower; i < upper; i++ {
		id := s.At(i).ID
		w.buf.Write(id[:])
	}
}

func (w *writer) splitRange(s Storage, lower, upper int, ub Item) {
	n := upper - lower
	if n < 2*buckets {
		w.idList(s, lower, upper, ub)
		return
	}
	per, extra := n/buckets, n%buckets
	cur := lower
	for i := 0; i < buckets; i++ {
		size := per
		if i < extra {
			size++
		}
		fp := s.Fingerprint(cur, cur+size)
		cur += size
		next := ub
		if cur != upper {
			next = minimalBound(s.At(cur-1), s.At(cur))
		}
		w.bound(next)
		w.varint(ModeFingerprint)
		w.buf.Write(fp[:])
	}
}

// minimalBound is the shortest bound b with prev < b <= cur.
func minimalBound(prev, cur Item) Item {
	if cur.Time != prev.Time {
		return Item{Time: cur.Time}
	}
	shared := 0
	for shared < IDSize && prev.ID[shared] == cur.ID[shared] {
		shared++
	}
	b := Item{Time: cur.Time}
	copy(b.ID[:], cur.ID[:min(shared+1, IDSize)])
	return b
}

// reader decodes one message.
type reader struct {
	b        []byte
	lastTime uint64
}

func (r *reader) empty() bool { return len(r.b) == 0 }
func (r *reader) left() int   { return len(r.b) }

func (r *reader) byte() (byte, bool) {
	if len(r.b) == 0 {
		return 0, false
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, true
}

func (r *reader) take(n int) ([]byte, bool) {
	if n < 0 || len(r.b) < n {
		return nil, false
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, true
}

func (r *reader) varint() (uint64, bool) {
	v, n := readVarint(r.b)
	if n <= 0 {
		return 0, false
	}
	r.b = r.b[n:]
	return v, true
}

func (r *reader) bound() (Item, error) {
	t, ok := r.varint()
	if !ok {
		return Item{}, fmt.Errorf("%w: truncated bound", ErrMalformed)
	}
	var b Item
	switch {
	case t == 0:
		b.Time = math.MaxUint64
	case r.lastTime == math.MaxUint64:
		return Item{}, fmt.Errorf("%w: bound after the infinite bound", ErrMalformed)
	default:
		d := t - 1
		if d > math.MaxUint64-1-r.lastTime {
			return Item{}, fmt.Errorf("%w: bound time overflows", ErrMalformed)
		}
		b.Time = r.lastTime + d
	}
	r.lastTime = b.Time
	n, ok := r.varint()
	if !ok || n > IDSize {
		return Item{}, fmt.Errorf("%w: bound ID length", ErrMalformed)
	}
	id, ok := r.take(int(n))
	if !ok {
		return Item{}, fmt.Errorf("%w: truncated bound ID", ErrMalformed)
	}
	copy(b.ID[:], id)
	return b, nil
}

// appendVarint writes n base-128, most significant group first, the high bit set on every
// byte but the last (negentropy's varint, not protobuf's).
func appendVarint(dst []byte, n uint64) []byte {
	var tmp [10]byte
	i := len(tmp) - 1
	tmp[i] = byte(n & 0x7f)
	n >>= 7
	for n > 0 {
		i--
		tmp[i] = byte(n&0x7f) | 0x80
		n >>= 7
	}
	return append(dst, tmp[i:]...)
}

// readVarint returns the value and the bytes read; n <= 0 on truncation or overflow.
func readVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		if v > math.MaxUint64>>7 {
			return 0, -1
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, -1
}

func sortIDs(ids []ID) {
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
}
