package batchtls

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/sec"
)

const echoProto = "/evalmesh/batchtls-echo/1.0.0"

// warm sends past crypto/tls's dynamic record sizing (small records for the first 128 KiB),
// so later writes are full 16 KiB records, and reads it on the other side.
func warm(t *testing.T, w, r sec.SecureConn) {
	t.Helper()
	buf := make([]byte, 256<<10)
	errc := make(chan error, 1)
	go func() { _, err := w.Write(buf); errc <- err }()
	if _, err := io.ReadFull(r, make([]byte, len(buf))); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// One 64 KiB Write is four 16 KiB TLS records: stock TLS writes them with four syscalls, the
// batched conn with one; 256 KiB (16 records) still fits one, and a 1 MiB Write is flushed
// in four pieces no larger than WriteBufferCap.
func TestBatchedWriteCoalescesRecords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batched bool
		size    int
		want    func(writes int64) bool
		wantStr string
	}{
		{"batched64K", true, 64 << 10, func(n int64) bool { return n == 1 }, "1"},
		{"stock64K", false, 64 << 10, func(n int64) bool { return n == 4 }, "4"},
		{"batched256K", true, 256 << 10, func(n int64) bool { return n == 1 }, "1"},
		{"batched1M", true, 1 << 20, func(n int64) bool { return n == 4 }, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server, cspy, _ := securePair(t, tc.batched, false)
			warm(t, client, server)
			cspy.writes.Store(0)
			cspy.maxWrite.Store(0)
			errc := make(chan error, 1)
			go func() { _, err := client.Write(make([]byte, tc.size)); errc <- err }()
			if _, err := io.ReadFull(server, make([]byte, tc.size)); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if n := cspy.writes.Load(); !tc.want(n) {
				t.Fatalf("one %d-byte Write made %d socket writes, want %s", tc.size, n, tc.wantStr)
			}
			if tc.batched && cspy.maxWrite.Load() > WriteBufferCap {
				t.Fatalf("a socket write of %d bytes, over the %d cap", cspy.maxWrite.Load(), WriteBufferCap)
			}
		})
	}
}

// With records already waiting in the socket, the batched reader takes several per read
// syscall: 256 KiB is 16 full records, read here with at most 4 socket reads.
func TestBatchedReadTakesSeveralRecordsPerSyscall(t *testing.T) {
	client, server, _, sspy := securePair(t, false, true)
	warm(t, client, server)
	const size = 256 << 10
	if _, err := client.Write(make([]byte, size)); err != nil { // fits the loopback socket buffers
		t.Fatal(err)
	}
	sspy.reads.Store(0)
	if _, err := io.ReadFull(server, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if n := sspy.reads.Load(); n > 4 {
		t.Fatalf("reading %d bytes (16 records) took %d socket reads, want <= 4", size, n)
	}
}

// A write deadline still bounds a Write whose flush is blocked on a peer that does not read,
// the error is the deadline's, and the conn stays failed (the record stream is cut).
func TestBatchedWriteDeadline(t *testing.T) {
	client, _, _, _ := securePair(t, true, false)
	if err := client.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	var err error
	for i := 0; i < 256 && err == nil; i++ { // at most 256 MiB: far past any socket buffer
		_, err = client.Write(buf)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a peer that does not read: err %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("deadline of 100ms took %v to fire", d)
	}
	client.SetWriteDeadline(time.Time{})
	if _, err := client.Write([]byte("x")); err == nil {
		t.Fatal("Write after a failed flush succeeded; want the conn to stay failed")
	}
}

// Close while Writes are blocked in a flush (peer not reading) unblocks them with an error,
// and Writes racing Close from several goroutines neither race (-race) nor hang.
func TestBatchedConcurrentWriteAndClose(t *testing.T) {
	for round := range 20 {
		client, server, _, _ := securePair(t, true, true)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, (g+1)*40<<10)
				for {
					if _, err := client.Write(buf); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		if round%2 == 0 { // half the rounds the peer reads, so Close lands mid-transfer
			go io.Copy(io.Discard, server)
		}
		// Close once some bytes are through; with the peer not reading the writers block.
		buf := make([]byte, 1)
		if round%2 == 0 {
			time.AfterFunc(time.Duration(round)*time.Millisecond, func() { client.Close() })
		} else {
			if _, err := io.ReadFull(server, buf); err != nil {
				t.Fatal(err)
			}
			go client.Close()
		}
		t0 := time.Now()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Writes still blocked 20s after Close", round)
		}
		t.Logf("round %d: %v", round, time.Since(t0))
		close(errs)
		for err := range errs {
			if err == nil {
				t.Fatalf("round %d: Write after Close returned no error", round)
			}
		}
	}
}

// A batched host and a stock libp2p TLS host interoperate, either dialling: several
// concurrent streams echo payloads written in tiny and large writes, byte for byte.
func TestBatchedInteropWithStockTLS(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		dialerBatch, lstnBatch bool
	}{
		{"batchedDialsStock", true, false},
		{"stockDialsBatched", false, true},
		{"batchedDialsBatched", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestHost(t, hostOpts{batched: tc.dialerBatch})
			l := newTestHost(t, hostOpts{batched: tc.lstnBatch})
			echo := func(s network.Stream) { io.Copy(s, s); s.Close() }
			d.SetStreamHandler(echoProto, echo)
			l.SetStreamHandler(echoProto, echo)
			connectHosts(t, d, l)
			conns := d.Network().ConnsToPeer(l.ID())
			if len(conns) != 1 || conns[0].ConnState().Security != ID {
				t.Fatalf("conns %v, want one secured with %s", conns, ID)
			}
			var wg sync.WaitGroup
			errc := make(chan error, 8)
			for i := range 8 {
				// Streams opened from both sides, so both hosts' Writes carry data.
				from, to := d, l
				if i%2 == 1 {
					from, to = l, d
				}
				wg.Add(1)
				go func() { defer wg.Done(); errc <- echoRoundTrip(from, to, uint64(i)) }()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func echoRoundTrip(from, to host.Host, seed uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := from.NewStream(ctx, to.ID(), echoProto)
	if err != nil {
		return err
	}
	defer s.Close()
	rng := mrand.New(mrand.NewPCG(seed, 1))
	payload := make([]byte, 6<<20+int(seed)*1001)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	werr := make(chan error, 1)
	go func() {
		rest := payload
		for len(rest) > 0 {
			var n int
			switch rng.IntN(4) {
			case 0:
				n = 1 + rng.IntN(16) // tiny
			case 1:
				n = 1 + rng.IntN(4<<10)
			default:
				n = 1 + rng.IntN(1<<20) // large: many records
			}
			n = min(n, len(rest))
			if _, err := s.Write(rest[:n]); err != nil {
				werr <- err
				return
			}
			rest = rest[n:]
		}
		werr <- s.CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("echo differs: got %d bytes sha256 %x, sent %d bytes sha256 %x", len(got), sha256.Sum256(got), len(payload), sha256.Sum256(payload))
	}
	return nil
}
