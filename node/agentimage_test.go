package node

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// saveTar writes `docker save ID` to a file in dir.
func saveTar(t *testing.T, ex *docker.Executor, id, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "image.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.SaveImage(context.Background(), id, f, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// rewriteTar copies the tar at src to a new file, passing each entry through edit (which
// may change the data) and appending extra entries.
func rewriteTar(t *testing.T, src, dst string, edit func(name string, data []byte) []byte, extra map[string][]byte) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if hdr.Typeflag == tar.TypeReg {
			data = edit(hdr.Name, data)
			hdr.Size = int64(len(data))
		}
		tw.WriteHeader(hdr)
		tw.Write(data)
	}
	for name, data := range extra {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return dst
}

type imageEnv struct {
	cli  *client.Client
	ex   *docker.Executor
	a, b *Node
}

func newImageEnv(t *testing.T) imageEnv {
	cli := executortest.DockerClient(t)
	ex, err := docker.New(docker.Options{Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	a, b := startNode(t, testOptions()), startNode(t, testOptions())
	connect(t, b, a)
	return imageEnv{cli: cli, ex: ex, a: a, b: b}
}

// addTar adds the tar on node a and returns the spec naming it.
func (e imageEnv) addTar(t *testing.T, tarPath, imageID string) *agentspec.Spec {
	t.Helper()
	c, err := e.a.Add(context.Background(), tarPath, AddOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	return &agentspec.Spec{Name: "moved", Version: "1", Image: imageID, ImageCID: c.String(), Command: []string{"/agent", "exit", "0"}}
}

func TestAgentImageMovesByCIDAndRuns(t *testing.T) {
	e := newImageEnv(t)
	ctx := context.Background()
	id := executortest.UniqueImage(t, e.cli, "evalmesh-test-moved:"+strings.ToLower(t.Name()))
	spec := e.addTar(t, saveTar(t, e.ex, id, t.TempDir()), id)
	executortest.RemoveImage(e.cli, id) // the engine now lacks it, as a node that never had it
	if has, _ := e.ex.HasImage(ctx, id); has {
		t.Fatal("image still present after removal")
	}
	var transferred, loaded int64
	err := e.b.EnsureAgentImage(ctx, spec, e.ex, ImageProgress{
		Transfer: func(d, _ int64) { transferred = d },
		Load:     func(d, _ int64) { loaded = d },
	})
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := e.ex.HasImage(ctx, id); !has {
		t.Fatal("image not loaded")
	}
	if pinned, _ := e.b.IsPinned(ctx, mustCID(t, spec.ImageCID)); !pinned {
		t.Error("image tar not pinned on the fetching node")
	}
	if transferred == 0 || loaded == 0 {
		t.Errorf("progress: transfer %d, load %d bytes; want both > 0", transferred, loaded)
	}
	// Loaded untagged, by ID: it runs by ID.
	env := executortest.Env{Image: id, Agent: "/agent"}
	cfg := env.Task(t, "exit", "0")
	h := executortest.Start(t, e.ex, cfg)
	if res := executortest.Wait(t, e.ex, h); !res.Successful() {
		t.Fatalf("agent from the moved image: %+v\n%s", res, executortest.Log(t, h))
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, "submission.csv")); err != nil {
		t.Fatalf("agent from the moved image left no submission: %v", err)
	}
	// Present now: a second call does nothing (no fetch, no load).
	if err := e.b.EnsureAgentImage(ctx, spec, e.ex, ImageProgress{Load: func(int64, int64) { t.Error("loaded twice") }}); err != nil {
		t.Fatal(err)
	}
}

func TestAgentImageOtherIDRefused(t *testing.T) {
	e := newImageEnv(t)
	ctx := context.Background()
	want := executortest.UniqueImage(t, e.cli, "evalmesh-test-want:"+strings.ToLower(t.Name()))
	other := executortest.UniqueImage(t, e.cli, "evalmesh-test-other:"+strings.ToLower(t.Name()))
	spec := e.addTar(t, saveTar(t, e.ex, other, t.TempDir()), want)
	executortest.RemoveImage(e.cli, want)
	executortest.RemoveImage(e.cli, other)
	err := e.b.EnsureAgentImage(ctx, spec, e.ex, ImageProgress{})
	if !docker.IsImageTarRefused(err) || !strings.Contains(err.Error(), "not the spec's image") {
		t.Fatalf("tar of another image: got %v, want a refusal naming the image mismatch", err)
	}
	for _, id := range []string{want, other} {
		if has, _ := e.ex.HasImage(ctx, id); has {
			t.Errorf("image %s was loaded from a refused tar", id)
		}
	}
}

func TestAgentImageRetagRefusedOriginalUntouched(t *testing.T) {
	e := newImageEnv(t)
	ctx := context.Background()
	victimTag := "evalmesh-test-victim:" + strings.ToLower(t.Name())
	victim := executortest.UniqueImage(t, e.cli, victimTag)
	hostile := executortest.UniqueImage(t, e.cli, "evalmesh-test-hostile:"+strings.ToLower(t.Name()))
	tarPath := saveTar(t, e.ex, hostile, t.TempDir())
	executortest.RemoveImage(e.cli, hostile)
	// Other tests share the engine, so the victim's own record is what is compared.
	before, err := e.cli.ImageInspect(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	// Each case: the tar, and the words the refusal must say.
	cases := map[string]string{
		"manifest RepoTags": rewriteTar(t, tarPath, tarPath+".tagged", func(name string, data []byte) []byte {
			if name != "manifest.json" {
				return data
			}
			return bytes.Replace(data, []byte(`"RepoTags":null`), []byte(`"RepoTags":["`+victimTag+`"]`), 1)
		}, nil),
		"repositories file": rewriteTar(t, tarPath, tarPath+".repositories", func(_ string, d []byte) []byte { return d }, map[string][]byte{
			"repositories": []byte(`{"evalmesh-test-victim":{"` + strings.TrimPrefix(victimTag, "evalmesh-test-victim:") + `":"` + strings.TrimPrefix(hostile, "sha256:") + `"}}`),
		}),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			spec := e.addTar(t, p, hostile)
			err := e.b.EnsureAgentImage(ctx, spec, e.ex, ImageProgress{})
			want := map[string]string{"manifest RepoTags": "tags the image as " + victimTag, "repositories file": "`repositories` file"}[name]
			if !docker.IsImageTarRefused(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("re-tagging tar: got %v, want a refusal saying %q", err, want)
			}
			t.Logf("refused: %v", err)
			got, err := e.ex.ResolveImage(ctx, victimTag)
			if err != nil || got != victim {
				t.Fatalf("%s now resolves to %q (%v), want the original %s", victimTag, got, err, victim)
			}
			if has, _ := e.ex.HasImage(ctx, hostile); has {
				t.Fatal("the hostile image was loaded")
			}
		})
	}
	after, err := e.cli.ImageInspect(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(before.RepoTags, ",") != strings.Join(after.RepoTags, ",") || before.Created != after.Created {
		t.Fatalf("the original image changed: tags %v -> %v", before.RepoTags, after.RepoTags)
	}
}

func TestAgentImageWithoutCIDSaysHow(t *testing.T) {
	e := newImageEnv(t)
	spec := &agentspec.Spec{Name: "absent", Version: "1", Image: "sha256:" + strings.Repeat("ab", 32), Command: []string{"/agent"}}
	err := e.b.EnsureAgentImage(context.Background(), spec, e.ex, ImageProgress{})
	if err == nil || !strings.Contains(err.Error(), "evalmesh agent add") {
		t.Fatalf("got %v, want an error saying how to provide the image", err)
	}
	if errors.Is(err, ErrNotFound) {
		t.Fatal("no fetch should have been tried")
	}
}

func mustCID(t *testing.T, s string) cid.Cid {
	t.Helper()
	c, err := cid.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
