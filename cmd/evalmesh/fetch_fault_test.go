package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
)

// writeFetchBundle writes a bundle of about 64 MiB: four 15 MiB files and 200 small ones of
// random bytes (incompressible, every block distinct), and returns its size.
func writeFetchBundle(t *testing.T, dir string) int64 {
	t.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{18}))
	var total int64
	write := func(name string, n int) {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(n)
	}
	for i := 0; i < 4; i++ {
		write(fmt.Sprintf("big/%d.bin", i), 15<<20)
	}
	for i := 0; i < 200; i++ {
		write(fmt.Sprintf("small/%03d.txt", i), 4<<10+i*97)
	}
	return total
}

// The receiving daemon is killed with SIGKILL while a fetch is past 90 % (the sender paced
// through the --test-controls pace control so that progress can be watched), restarted, and
// the bundle fetched again with `evalmesh task get --json`: the fetch resumes from the blocks
// the killed daemon had verified and stored (kept_bytes at least 80 % of the bundle), and the
// bundle it unpacks and pins is the one added.
func TestFaultKilledFetchResumes(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 2)
	a, b := c.start(0), c.start(1)
	c.connect(b, a)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	src := filepath.Join(t.TempDir(), "bundle")
	size := writeFetchBundle(t, src)
	root, err := a.client.Add(ctx, src, true, nil)
	if err != nil {
		t.Fatalf("add on %s: %v", a.lab.Name, err)
	}
	// 8 MB/s: about 8 s for the bundle, progress events every 100 ms (under 2 % apart).
	if err := a.client.Pace(ctx, 8<<20); err != nil {
		t.Fatalf("pace: %v", err)
	}
	var done, total atomic.Int64
	fetchErr := make(chan error, 1)
	go func() {
		_, err := b.client.PinFetch(ctx, root, "", func(d, tot int64) { done.Store(d); total.Store(tot) })
		fetchErr <- err
	}()
	testutil.WaitFor(t, 90*time.Second, "the first fetch to pass 90 %", func() bool {
		select {
		case err := <-fetchErr:
			t.Fatalf("the first fetch ended before 90 %% (%d of %d bytes): %v", done.Load(), total.Load(), err)
		default:
		}
		tot := total.Load()
		return tot > 0 && done.Load()*10 >= tot*9
	})
	b.signal(syscall.SIGKILL)
	<-b.exited
	atKill, declared := done.Load(), total.Load()
	if err := <-fetchErr; err == nil {
		t.Fatalf("the fetch on the killed daemon succeeded")
	}
	if declared < size {
		t.Fatalf("the fetch declared %d bytes for a bundle of %d bytes of files", declared, size)
	}
	t.Logf("killed %s at %d of %d bytes (%.0f %%)", b.lab.Name, atKill, declared, 100*float64(atKill)/float64(declared))

	b = c.start(1)
	c.connect(b, a)
	if err := a.client.Pace(ctx, 0); err != nil {
		t.Fatalf("pace off: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "got")
	code, out, errOut := nodeCLI(t, "task", "get", "--json", root.String(), dst, "--home", b.lab.Home.Dir)
	if code != 0 {
		t.Fatalf("task get after the restart: %s\n%s", errOut, readLog(b.log))
	}
	var got struct {
		CID        string `json:"cid"`
		Bytes      int64  `json:"bytes"`
		KeptBlocks int64  `json:"kept_blocks"`
		KeptBytes  int64  `json:"kept_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("task get --json: %q: %v", out, err)
	}
	if got.CID != root.String() {
		t.Fatalf("task get --json cid %s, want %s", got.CID, root)
	}
	if got.Bytes != declared || got.KeptBytes*10 < got.Bytes*8 || got.KeptBlocks < 2 {
		t.Fatalf("the fetch after the restart kept %d blocks, %d of %d bytes (%d were received before the kill): want at least 80 %%",
			got.KeptBlocks, got.KeptBytes, got.Bytes, atKill)
	}
	if !strings.Contains(readLog(b.log), "resumed: kept ") {
		t.Errorf("the restarted daemon's log does not say the fetch resumed:\n%s", readLog(b.log))
	}
	t.Logf("resumed: kept %d blocks, %d of %d bytes (%.0f %%)", got.KeptBlocks, got.KeptBytes, got.Bytes, 100*float64(got.KeptBytes)/float64(got.Bytes))

	// The bundle is the one added: same files, same bytes, and pinned under its CID.
	var files int
	err = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, _ := os.ReadFile(p)
		have, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(have, want) {
			return fmt.Errorf("%s differs after the resumed fetch (%v)", rel, err)
		}
		files++
		return nil
	})
	if err != nil || files != 204 {
		t.Fatalf("unpacked bundle: %d files compared, %v", files, err)
	}
	pins, err := b.client.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !pinned(pins, root) {
		t.Fatalf("%s is not pinned on %s after task get: %v", root, b.lab.Name, pins)
	}
}

func pinned(pins []node.PinInfo, root cid.Cid) bool {
	for _, p := range pins {
		if p.CID == root.String() {
			return true
		}
	}
	return false
}

// The line a resumed fetch prints, in the words; nothing when it did not resume.
func TestPrintKept(t *testing.T) {
	var b strings.Builder
	printKept(&b, node.FetchReport{KeptBlocks: 1843, KeptBytes: 1932735283, Total: 2 << 30})
	if want := "resumed: kept 1,843 blocks (1.80 GiB) of 2.00 GiB already held\n"; b.String() != want {
		t.Fatalf("printKept: %q, want %q", b.String(), want)
	}
	b.Reset()
	printKept(&b, node.FetchReport{KeptBlocks: 1, KeptBytes: 300, Total: 1 << 30})
	if b.Len() != 0 {
		t.Fatalf("printKept of a fetch that kept only its root: %q, want nothing", b.String())
	}
}
