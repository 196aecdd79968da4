package vstore

import (
	"testing"

	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
)

// BenchmarkStoreAdd is the receiving side of a sync: verified batches of 1,000 real run
// attestations committed to a fresh store (ns/op is per envelope).
func BenchmarkStoreAdd(b *testing.B) {
	f, trust := vstoretest.Lab(b, "acme")
	envs := vstoretest.SignRuns(b, f, 0, 4000)
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		s, err := Open(b.TempDir(), Options{Trust: trust})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for lo := 0; lo < len(envs) && done < b.N; lo += 1000 {
			if _, err := s.Attestations().Add(envs[lo:lo+1000], SourceSync, "bench"); err != nil {
				b.Fatal(err)
			}
			done += 1000
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
