//go:build !evalmesh_benchfill

package main

import (
	"errors"

	"github.com/evalmesh/evalmesh/node/vstore"
)

// fill needs vstore.Set.FillUnverified, which exists only in builds with the tag
// evalmesh_benchfill (bench/sync.sh builds with it).
func fill(*vstore.Set, [][]byte, []uint64) error {
	return errors.New("the in-sync case needs a build with -tags evalmesh_benchfill (use bench/sync.sh)")
}
