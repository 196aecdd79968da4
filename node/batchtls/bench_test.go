package batchtls

import (
	"context"
	"flag"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

const benchProto = "/evalmesh/bench-sink/1.0.0"

var benchRounds = flag.Int("batchtls.rounds", 1, "BenchmarkStream: rounds of all variants, alternating (go test -count repeats each variant back to back)")

func cpuSeconds(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkStream moves b.N MiB over one libp2p stream between two real hosts on 127.0.0.1
// (TCP, TLS, yamux), for each variant in turn, so stock and batched TLS run in the same
// process under the same load. Run with -benchtime=1024x for 1 GiB and -args -batchtls.rounds=N
// to alternate the variants N times.
// cpu-s/GiB is the whole process (sender and receiver together), from getrusage.
func BenchmarkStream(b *testing.B) {
	variants := []struct {
		name string
		o    hostOpts
	}{
		{"stock", hostOpts{}},
		{"batched", hostOpts{batched: true}},
		{"stock-yamux256K", hostOpts{maxMessageSize: 256 << 10}},
		{"batched-yamux256K", hostOpts{batched: true, maxMessageSize: 256 << 10}},
	}
	for range *benchRounds {
		for _, v := range variants {
			b.Run(v.name, func(b *testing.B) { benchStream(b, v.o) })
		}
	}
}

func benchStream(b *testing.B, o hostOpts) {
	src, dst := newTestHost(b, o), newTestHost(b, o)
	got := make(chan int64, 1)
	dst.SetStreamHandler(benchProto, func(s network.Stream) {
		n, _ := io.Copy(io.Discard, s)
		s.Close()
		got <- n
	})
	connectHosts(b, src, dst)
	s, err := src.NewStream(context.Background(), dst.ID(), benchProto)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	// Warm up past tls's small first records and yamux's window growth.
	for range 16 {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	cpu0 := cpuSeconds(b)
	for range b.N {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.CloseWrite(); err != nil {
		b.Fatal(err)
	}
	n := <-got
	b.StopTimer()
	cpu := cpuSeconds(b) - cpu0
	if want := int64(b.N+16) * int64(len(buf)); n != want {
		b.Fatal(fmt.Errorf("received %d bytes, sent %d", n, want))
	}
	b.ReportMetric(cpu/(float64(b.N)/1024), "cpu-s/GiB")
}
