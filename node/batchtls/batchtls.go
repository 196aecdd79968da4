// Package batchtls owns the daemon's TLS security transport: go-libp2p's TLS transport
// (p2p/security/tls, protocol /tls/1.0.0, byte-identical on the wire) over an insecure
// connection that gathers the TLS records of one Write into one write syscall and reads the
// socket through a buffer, so several records arrive per read syscall.
//
// Why hand-written: crypto/tls writes every record (at most 16 KiB of plaintext) with its own
// net.Conn.Write and reads about one record per net.Conn.Read, and has no option to batch
// either. yamux hands tls.Conn 64 KiB frames, so a 1 GiB transfer costs 65,536 write syscalls
// on the sender and as many read syscalls on the receiver; on the PVM guests evalmesh runs on,
// a syscall is costly (docs/transfer-protocol.md, "Batched TLS records", has the figures).
package batchtls

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
	tptu "github.com/libp2p/go-libp2p/p2p/net/upgrader"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

// ID is the protocol ID; it is libp2p's TLS ID because the wire format is libp2p's TLS.
const ID = libp2ptls.ID

const (
	// WriteBufferCap bounds the records gathered during one Write: past it they are flushed,
	// so a huge Write does not grow the buffer without bound. It holds 16 full TLS 1.3
	// records (256 KiB of plaintext), so a 256 KiB yamux frame still goes in one syscall.
	WriteBufferCap = 16 * (maxPlaintext + recordOverhead)
	maxPlaintext   = 16 << 10
	recordOverhead = 5 + 1 + 16 // record header, inner content type, AES-GCM tag
	// ReadBufferSize is the size of the buffer the TLS layer reads the socket through.
	ReadBufferSize = 128 << 10
)

// Transport is libp2p's TLS transport with batched record I/O.
type Transport struct {
	inner *libp2ptls.Transport
}

var _ sec.SecureTransport = (*Transport)(nil)

// New has libp2ptls.New's signature, so libp2p.Security(ID, New) builds it.
func New(id protocol.ID, key crypto.PrivKey, muxers []tptu.StreamMuxer) (*Transport, error) {
	inner, err := libp2ptls.New(id, key, muxers)
	if err != nil {
		return nil, err
	}
	return &Transport{inner: inner}, nil
}

// ID is the protocol ID the transport was built with.
func (t *Transport) ID() protocol.ID { return t.inner.ID() }

// SecureInbound runs libp2p's TLS handshake as a server over the batching conn.
func (t *Transport) SecureInbound(ctx context.Context, insecure net.Conn, p peer.ID) (sec.SecureConn, error) {
	bc := newBatchConn(insecure)
	sc, err := t.inner.SecureInbound(ctx, bc, p)
	if err != nil {
		return nil, err
	}
	return &secureConn{SecureConn: sc, bc: bc}, nil
}

// SecureOutbound runs libp2p's TLS handshake as a client over the batching conn.
func (t *Transport) SecureOutbound(ctx context.Context, insecure net.Conn, p peer.ID) (sec.SecureConn, error) {
	bc := newBatchConn(insecure)
	sc, err := t.inner.SecureOutbound(ctx, bc, p)
	if err != nil {
		return nil, err
	}
	return &secureConn{SecureConn: sc, bc: bc}, nil
}

// secureConn is libp2p's TLS conn whose Write gathers the records it emits and flushes them
// once, before it returns, so a Write that returned without error has handed all its bytes to
// the kernel, as with stock TLS.
type secureConn struct {
	sec.SecureConn
	bc *batchConn
}

func (c *secureConn) Write(p []byte) (int, error) {
	c.bc.beginGather()
	n, err := c.SecureConn.Write(p)
	if ferr := c.bc.endGather(); ferr != nil && err == nil {
		// Some of the records tls counted as written did not reach the socket; how many
		// plaintext bytes did is unknown, so none are claimed.
		return 0, ferr
	}
	return n, err
}

// Close mirrors tls.Conn.Close: a Close while a Write is in flight is taken as a request to
// break that Write, so the socket is closed first (failing a pending flush at once) instead
// of queueing a close_notify behind the gathered records. A Write that starts between this
// check and tls's own interlock can still hold the close_notify behind its flush; tls bounds
// that wait with the 5 s write deadline it sets for close_notify, as it does for stock TLS
// on a full socket.
func (c *secureConn) Close() error {
	if !c.bc.gathering() {
		return c.SecureConn.Close()
	}
	err := c.bc.Conn.Close()
	// tls closes the socket again; that second close's ErrClosed is not this Close's error.
	if terr := c.SecureConn.Close(); !errors.Is(terr, net.ErrClosed) && err == nil {
		err = terr
	}
	return err
}

// batchConn is the insecure conn as tls.Conn sees it. Only tls.Conn reads it (through r).
// Writes made while a secureConn.Write is in progress (gathers > 0) are appended to buf;
// others are written at once, after whatever is pending, under mu, so no write overtakes
// records gathered before it. Deadlines and Close go straight to the socket (no mu) so they
// can interrupt a flush blocked on a slow peer.
type batchConn struct {
	net.Conn
	r *bufio.Reader

	mu      sync.Mutex
	gathers atomic.Int32 // changed under mu; read without it by Close, which must not wait on a flush
	buf     []byte
	werr    error // sticky: after a failed write the record stream on the wire is broken
}

func newBatchConn(c net.Conn) *batchConn {
	return &batchConn{Conn: c, r: bufio.NewReaderSize(c, ReadBufferSize)}
}

func (b *batchConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.werr != nil {
		return 0, b.werr
	}
	if b.gathers.Load() == 0 {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		n, err := b.Conn.Write(p)
		if err != nil {
			b.werr = err
		}
		return n, err
	}
	if len(b.buf)+len(p) > WriteBufferCap {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > WriteBufferCap {
			n, err := b.Conn.Write(p)
			if err != nil {
				b.werr = err
			}
			return n, err
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *batchConn) beginGather() {
	b.mu.Lock()
	b.gathers.Add(1)
	b.mu.Unlock()
}

// endGather flushes what is pending, the records of the Write that called it and any a
// concurrent Write or tls itself (alert, KeyUpdate) added behind them, and ends the gather.
// The count drops only after the flush, so a Close during the flush sees a Write in flight.
func (b *batchConn) endGather() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.flushLocked()
	b.gathers.Add(-1)
	return err
}

func (b *batchConn) gathering() bool { return b.gathers.Load() > 0 }

func (b *batchConn) flushLocked() error {
	if b.werr != nil {
		b.buf = b.buf[:0]
		return b.werr
	}
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	if err != nil {
		b.werr = err
	}
	return err
}
