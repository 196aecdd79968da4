package xfer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
)

// ProtocolID is the libp2p stream protocol served by Server.
const ProtocolID = "/evalmesh/xfer/1.0.0"

// Limits on what a peer may send; they bound memory per stream.
const (
	// MaxBlockSize is the largest block accepted on the wire (bitswap's limit is 2 MiB; UnixFS
	// chunks are 256 KiB or 1 MiB).
	MaxBlockSize = 4 << 20
	// MaxRequestItems bounds the number of roots in one request.
	MaxRequestItems = 1 << 16
	// maxCIDLen bounds an encoded CID (a sha2-512 CIDv1 is 68 bytes).
	maxCIDLen = 128
	// maxErrorLen bounds the message of an error frame.
	maxErrorLen = 1024
)

// Mode says how much of the DAG under a requested CID the server sends.
type Mode byte

const (
	// ModeBlock sends only the named block.
	ModeBlock Mode = 0
	// ModeDAG sends the named block and every block below it, depth first, pre-order,
	// children in link order, each CID at most once per stream.
	ModeDAG Mode = 1
)

// Item is one requested root.
type Item struct {
	Mode Mode
	Cid  cid.Cid
}

// Frame types sent by the server.
const (
	frameBlock byte = 0
	frameEnd   byte = 1
	frameError byte = 2
)

// AppendRequest encodes a request: uvarint count, then per item a mode byte, the CID's
// length as uvarint and the CID's binary form.
func AppendRequest(buf []byte, items []Item) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(items)))
	for _, it := range items {
		b := it.Cid.Bytes()
		buf = append(buf, byte(it.Mode))
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return buf
}

// ReadRequest decodes a request written by AppendRequest, rejecting anything out of bounds.
func ReadRequest(r *bufio.Reader) ([]Item, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("reading request count: %w", err)
	}
	if n == 0 || n > MaxRequestItems {
		return nil, fmt.Errorf("request has %d items, want 1..%d", n, MaxRequestItems)
	}
	items := make([]Item, 0, min(n, 1024))
	var cb [maxCIDLen]byte
	for i := uint64(0); i < n; i++ {
		m, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("reading item %d: %w", i, noEOF(err))
		}
		if Mode(m) != ModeBlock && Mode(m) != ModeDAG {
			return nil, fmt.Errorf("item %d: unknown mode %d", i, m)
		}
		l, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, fmt.Errorf("reading item %d: %w", i, noEOF(err))
		}
		if l == 0 || l > maxCIDLen {
			return nil, fmt.Errorf("item %d: CID length %d, want 1..%d", i, l, maxCIDLen)
		}
		if _, err := io.ReadFull(r, cb[:l]); err != nil {
			return nil, fmt.Errorf("reading item %d: %w", i, noEOF(err))
		}
		c, err := cid.Cast(cb[:l])
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		items = append(items, Item{Mode: Mode(m), Cid: c})
	}
	return items, nil
}

func writeBlockFrame(w *bufio.Writer, data []byte) error {
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = frameBlock
	n := binary.PutUvarint(hdr[1:], uint64(len(data)))
	if _, err := w.Write(hdr[:1+n]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

func writeErrorFrame(w *bufio.Writer, msg string) error {
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = frameError
	n := binary.PutUvarint(hdr[1:], uint64(len(msg)))
	if _, err := w.Write(hdr[:1+n]); err != nil {
		return err
	}
	_, err := w.WriteString(msg)
	return err
}

// PeerError is an error frame sent by the server: it could not serve the request.
type PeerError struct{ Msg string }

func (e *PeerError) Error() string { return "peer says: " + e.Msg }

// errEnd is returned by readFrame for the end-of-response frame.
var errEnd = errors.New("end of response")

// readFrame reads one server frame into a fresh slice. It returns the block data, errEnd, a
// *PeerError or a decoding error.
func readFrame(r *bufio.Reader) ([]byte, error) { return readFrameInto(r, nil) }

// readFrameInto is readFrame that takes the block's slice from alloc (nil: make).
func readFrameInto(r *bufio.Reader, alloc func(int) []byte) ([]byte, error) {
	t, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	switch t {
	case frameEnd:
		return nil, errEnd
	case frameBlock, frameError:
	default:
		return nil, fmt.Errorf("unknown frame type %d", t)
	}
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, noEOF(err)
	}
	if t == frameError {
		if l > maxErrorLen {
			return nil, fmt.Errorf("error frame of %d bytes, limit %d", l, maxErrorLen)
		}
		msg := make([]byte, l)
		if _, err := io.ReadFull(r, msg); err != nil {
			return nil, noEOF(err)
		}
		return nil, &PeerError{Msg: string(msg)}
	}
	if l > MaxBlockSize {
		return nil, fmt.Errorf("block of %d bytes, limit %d", l, MaxBlockSize)
	}
	var data []byte
	if alloc != nil {
		data = alloc(int(l))
	} else {
		data = make([]byte, l)
	}
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, noEOF(err)
	}
	return data, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
