//go:build evalmesh_benchfill

package main

import "github.com/evalmesh/evalmesh/node/vstore"

// fill writes the in-sync case's stand-in records (vstore.Set.FillUnverified).
func fill(set *vstore.Set, envs [][]byte, times []uint64) error {
	return set.FillUnverified(envs, times)
}
