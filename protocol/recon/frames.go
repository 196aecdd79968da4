package recon

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The sync stream's frames (docs/protocol-sync.md): uvarint(length of type and body), one
// type byte, the body. This file encodes and decodes them; the node reads and writes them.

// Frame types.
const (
	FrameHello     = 0x01 // body: set name (the rest of the frame)
	FrameRecon     = 0x02 // body: one reconciliation message
	FrameFetch     = 0x03 // body: uvarint count, count IDs
	FrameEnvelopes = 0x04 // body: uvarint count, count × (uvarint length, bytes): reply to Fetch
	FramePush      = 0x05 // body: as Envelopes, unrequested: envelopes the initiator has and we lack
	FrameDone      = 0x06 // body: empty; the initiator is finished
	FrameError     = 0x07 // body: a UTF-8 message; the sender closes the stream
)

const (
	// MaxFrameSize bounds a whole frame: a reconciliation message or a batch of envelopes.
	MaxFrameSize = MaxMessageSize + 1024
	// MaxFetchIDs is the most IDs one Fetch may ask for.
	MaxFetchIDs = 4096
	// MaxSetName is the longest set name in a Hello.
	MaxSetName = 64
)

// ErrFrame is wrapped by every frame decoding error.
var ErrFrame = errors.New("malformed sync frame")

// AppendFrame appends one frame.
func AppendFrame(dst []byte, typ byte, body []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(1+len(body)))
	dst = append(dst, typ)
	return append(dst, body...)
}

// ReadFrame reads one frame of at most max bytes (MaxFrameSize when max <= 0).
func ReadFrame(r *bufio.Reader, max int) (typ byte, body []byte, err error) {
	if max <= 0 {
		max = MaxFrameSize
	}
	var lenBuf []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(lenBuf) == 0 {
				return 0, nil, io.EOF
			}
			return 0, nil, fmt.Errorf("%w: length: %v", ErrFrame, err)
		}
		lenBuf = append(lenBuf, c)
		if c < 0x80 || len(lenBuf) == binary.MaxVarintLen64 {
			break
		}
	}
	n, k := uvarint(lenBuf)
	if k != len(lenBuf) {
		return 0, nil, fmt.Errorf("%w: frame length is not a minimal uvarint", ErrFrame)
	}
	if n == 0 || n > uint64(max) {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes (limit %d)", ErrFrame, n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, fmt.Errorf("%w: truncated frame: %v", ErrFrame, err)
	}
	return buf[0], buf[1:], nil
}

// EncodeIDs is a Fetch body.
func EncodeIDs(ids []ID) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 10+len(ids)*IDSize), uint64(len(ids)))
	for i := range ids {
		b = append(b, ids[i][:]...)
	}
	return b
}

// DecodeIDs reads a Fetch body: at most MaxFetchIDs IDs and nothing after them.
func DecodeIDs(b []byte) ([]ID, error) {
	n, k := uvarint(b)
	if k <= 0 || n > MaxFetchIDs || uint64(len(b)-k) != n*IDSize {
		return nil, fmt.Errorf("%w: fetch of %d IDs in %d bytes (at most %d IDs)", ErrFrame, n, len(b), MaxFetchIDs)
	}
	b = b[k:]
	ids := make([]ID, n)
	for i := range ids {
		copy(ids[i][:], b[i*IDSize:])
	}
	return ids, nil
}

// EncodeEnvelopes is an Envelopes or Push body.
func EncodeEnvelopes(envs [][]byte) []byte {
	size := 10
	for _, e := range envs {
		size += 10 + len(e)
	}
	b := binary.AppendUvarint(make([]byte, 0, size), uint64(len(envs)))
	for _, e := range envs {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// DecodeEnvelopes reads an Envelopes or Push body; each envelope is at most maxEnvelope
// bytes, and nothing may follow the last. The envelopes alias b.
func DecodeEnvelopes(b []byte, maxEnvelope int) ([][]byte, error) {
	n, k := uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: envelope count", ErrFrame)
	}
	b = b[k:]
	envs := make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := uvarint(b)
		if k <= 0 || l > uint64(maxEnvelope) || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: envelope %d: length (at most %d bytes)", ErrFrame, i, maxEnvelope)
		}
		envs = append(envs, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last envelope", ErrFrame, len(b))
	}
	return envs, nil
}

// uvarint is binary.Uvarint that also refuses a non-minimal encoding (k <= 0), so every
// frame has exactly one encoding.
func uvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k <= 0 || k != len(binary.AppendUvarint(nil, v)) {
		return 0, -1
	}
	return v, k
}
