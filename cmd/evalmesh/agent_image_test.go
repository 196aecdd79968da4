package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/tasks"
)

// `evalmesh agent add` and `agent pull` end to end, with two real daemon processes and the
// local Docker engine: add saves the image by ID into lab 0's daemon and writes image_cid
// into the spec; with the image removed from the engine (as on a machine that never had
// it), pull on lab 1 fetches the tar from lab 0, pins it and loads the image by its ID; a
// second pull finds it present and loads nothing. Lab 1 holds the tar's leading chunks
// before the first pull (a copy of the tar cut at a chunk boundary, added there, as a pull
// the daemon lost part way leaves them), so the first pull reports them as kept_blocks and
// kept_bytes, as `task get` and `pin add` do.
func TestAgentAddThenPullOverTwoDaemons(t *testing.T) {
	cli := executortest.DockerClient(t)
	id := executortest.UniqueImage(t, cli, "evalmesh-test-cli-pull:"+strings.ToLower(t.Name()))
	c := newCluster(t, 2)
	a, b := c.start(0), c.start(1)
	c.connect(b, a)

	spec := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(spec, []byte("# kept by agent add\nname: pulled\nversion: \"1\"\nimage: "+id+"\ncommand: [/agent, exit, \"0\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, e, code := runE2(t, "agent", "add", spec, "--home", a.lab.Home.Dir, "--json")
	if code != 0 {
		t.Fatalf("agent add: %d %s", code, e)
	}
	var added struct {
		ImageCID string `json:"image_cid"`
		Bytes    int64
	}
	if err := json.Unmarshal([]byte(out), &added); err != nil || added.ImageCID == "" || added.Bytes == 0 {
		t.Fatalf("agent add printed %q (%v)", out, err)
	}
	after, err := agentspec.Load(spec)
	if err != nil || after.ImageCID != added.ImageCID || after.Image != id {
		t.Fatalf("spec after agent add: %+v (%v); want image %s, image_cid %s", after, err, id, added.ImageCID)
	}
	if text, _ := os.ReadFile(spec); !strings.Contains(string(text), "# kept by agent add") {
		t.Errorf("agent add lost the spec's comment:\n%s", text)
	}

	executortest.RemoveImage(cli, id)
	if _, err := cli.ImageInspect(context.Background(), id); err == nil {
		t.Fatal("image still in the engine after removal")
	}
	keptBytes := addTarPrefix(t, a, b, added.ImageCID)
	type pulled struct {
		Loaded     bool
		Bytes      int64
		KeptBlocks int64 `json:"kept_blocks"`
		KeptBytes  int64 `json:"kept_bytes"`
	}
	pull := func() pulled {
		t.Helper()
		out, e, code := runE2(t, "agent", "pull", spec, "--home", b.lab.Home.Dir, "--json")
		if code != 0 {
			t.Fatalf("agent pull: %d %s", code, e)
		}
		var p pulled
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("agent pull printed %q: %v", out, err)
		}
		return p
	}
	if p := pull(); !p.Loaded || p.Bytes != added.Bytes {
		t.Fatalf("first pull: %+v; want the image loaded from a %d-byte tar", p, added.Bytes)
	} else if p.KeptBlocks < 2 || p.KeptBytes < keptBytes {
		t.Fatalf("first pull kept %d blocks, %d bytes; lab 1 held the tar's first %d bytes (%d chunks): want them kept",
			p.KeptBlocks, p.KeptBytes, keptBytes, keptBytes/tasks.ChunkSize)
	}
	if _, err := cli.ImageInspect(context.Background(), id); err != nil {
		t.Fatalf("image %s not in the engine after pull: %v", id, err)
	}
	pins, err := b.client.Pins(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pins, func(p node.PinInfo) bool { return p.CID == added.ImageCID }) {
		t.Errorf("lab 1 does not pin the image tar %s: %v", added.ImageCID, pins)
	}
	if p := pull(); p.Loaded {
		t.Fatalf("second pull loaded again: %+v", p)
	}
}

// addTarPrefix reads the image tar root from a's daemon and adds its leading whole chunks as a
// file on b's, which then holds those leaves (cut at a multiple of the chunk size, they are
// the tar's own) but not the tar's root; it returns their bytes.
func addTarPrefix(t *testing.T, a, b *daemonProc, root string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := cid.Decode(root)
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := a.client.Cat(ctx, c)
	if err != nil {
		t.Fatalf("cat the image tar on lab 0: %v", err)
	}
	defer r.Close()
	keep := (size - 1) / tasks.ChunkSize * tasks.ChunkSize
	if keep < 2*tasks.ChunkSize {
		t.Fatalf("the image tar is %d bytes, at most 2 chunks: too small to hold a prefix of 2", size)
	}
	p := filepath.Join(t.TempDir(), "tar-prefix")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, r, keep); err != nil {
		t.Fatalf("copy the tar's first %d bytes: %v", keep, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Add(ctx, p, true, nil); err != nil {
		t.Fatalf("add the tar's prefix on lab 1: %v", err)
	}
	return keep
}
