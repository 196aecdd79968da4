//go:build evalmesh_benchfill

package vstore

import (
	"encoding/binary"
	"fmt"
)

// FillUnverified stores envs as accepted records, each with order key times[i], WITHOUT
// verifying them, then reloads the set's index. It exists only in builds with the tag
// evalmesh_benchfill (bench/sync.sh's driver), to give two stores the same million IDs
// in seconds where signing and verifying a million real envelopes would take many
// minutes: reconciliation reads IDs and times only, never the bytes. The daemon is never
// built with it.
func (set *Set) FillUnverified(envs [][]byte, times []uint64) error {
	if len(envs) != len(times) {
		return fmt.Errorf("fill: %d envelopes, %d times", len(envs), len(times))
	}
	set.addMu.Lock()
	defer set.addMu.Unlock()
	for lo := 0; lo < len(envs); lo += 10000 {
		b := set.st.db.NewBatch()
		for i := lo; i < min(len(envs), lo+10000); i++ {
			id := DigestOf(envs[i])
			var tb [8]byte
			binary.BigEndian.PutUint64(tb[:], times[i])
			val := append(append(tb[:], sourceByte(SourceLocal)), envs[i]...)
			if err := b.Set(set.key('e', id[:]), val, nil); err != nil {
				b.Close()
				return err
			}
			if err := b.Set(set.key('o', tb[:], id[:]), nil, nil); err != nil {
				b.Close()
				return err
			}
		}
		if err := b.Commit(set.st.wo); err != nil {
			b.Close()
			return err
		}
		b.Close()
	}
	if set == set.st.attestations {
		// Nothing was verified, so no value was kept: the next Values call restores them all.
		set.st.values.mu.Lock()
		set.st.values.loaded = false
		set.st.values.mu.Unlock()
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.load()
}
