package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A node whose home is on a full disk and whose metadata store was never opened fails to
// start saying the disk is full and to free space, at WARN; it must not send the operator
// looking for a second daemon holding the datastore's lock (the advice's "blocks" once
// matched the lock check).
func TestOpenOnFullDiskSaysFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	h := tmpfsHome(t, "4m")
	fillDisk(t, filepath.Join(h.Dir, "filler"))
	var warned []string
	opts := testOptions()
	opts.Warnf = func(format string, args ...any) { warned = append(warned, format) }
	n, err := New(context.Background(), h, opts)
	if err == nil {
		n.Close()
		t.Fatal("a node started on a full disk")
	}
	if !errors.Is(err, ErrDiskFull) || strings.Contains(err.Error(), "locked") || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("start on a full disk: %v; want a disk-full error saying to free space, not a lock", err)
	}
	if len(warned) == 0 {
		t.Errorf("the failed metadata store was not logged at WARN")
	}
	t.Logf("error shown: %v", err)
}
