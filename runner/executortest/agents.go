package executortest

// The test agent program (./agent) is built as a static binary for the process executor and
// as a FROM scratch image for the docker executor, both cached by content hash so repeated
// test runs do not rebuild.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// srcDir is the folder of the agent program.
func srcDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "agent")
}

// Binary returns the path of the static agent binary, building it once per source version
// (cached under the user cache folder, keyed by a hash of the source and the Go version).
func Binary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() { binPath, binErr = buildBinary() })
	if binErr != nil {
		tb.Fatalf("build test agent: %v", binErr)
	}
	return binPath
}

func buildBinary() (string, error) {
	src, err := os.ReadFile(filepath.Join(srcDir(), "main.go"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(src)
	h.Write([]byte(runtime.Version() + runtime.GOOS + runtime.GOARCH))
	key := hex.EncodeToString(h.Sum(nil))[:16]
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "evalmesh-testagents", key)
	out := filepath.Join(dir, "agent")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".agent-%d", os.Getpid()))
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = srcDir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	// World-readable and executable: the docker executor runs agents as nobody.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	return out, os.Rename(tmp, out)
}

// DockerClient returns a client for the local engine, or skips the test when none answers.
func DockerClient(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		tb.Skipf("skipping: no Docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		tb.Skipf("skipping: no Docker engine answers at %s: %v", cli.DaemonHost(), err)
	}
	cli.NegotiateAPIVersion(ctx)
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// PodmanSocket is where the podman tests find podman's Docker-compatible API:
// $EVALMESH_PODMAN_SOCKET, or rootful podman's /run/podman/podman.sock.
func PodmanSocket() string {
	if s := os.Getenv("EVALMESH_PODMAN_SOCKET"); s != "" {
		return s
	}
	return "/run/podman/podman.sock"
}

// PodmanClient talks to podman at PodmanSocket; it skips the test, saying how to start
// podman's service, when nothing answers there, and fails it when the engine there is not
// podman.
func PodmanClient(tb testing.TB) *client.Client {
	tb.Helper()
	sock := PodmanSocket()
	if _, err := os.Stat(sock); err != nil {
		tb.Skipf("skipping: no podman socket at %s (start `podman system service --time=0 unix://%s`, or set EVALMESH_PODMAN_SOCKET)", sock, sock)
	}
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		tb.Skipf("skipping: podman at %s does not answer: %v", sock, err)
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return cli
		}
	}
	tb.Fatalf("the engine at %s is not podman: %+v", sock, v.Components)
	return nil
}

var imgMu sync.Mutex

// Image returns the reference of a FROM scratch image holding only the agent at /agent,
// building it when the engine lacks it. The tag is the binary's content hash.
func Image(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	bin := Binary(tb)
	imgMu.Lock()
	defer imgMu.Unlock()
	ref, err := buildImage(cli, bin)
	if err != nil {
		tb.Fatalf("build test agent image: %v", err)
	}
	return ref
}

func buildImage(cli *client.Client, bin string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	return buildScratchImage(cli, "evalmesh-testagent", []imageFile{{"agent", b, 0o755}}, "/agent")
}

// imageFile is one executable of a FROM scratch image, at /name.
type imageFile struct {
	name string
	data []byte
	mode int64
}

// buildScratchImage builds (unless the engine has it) a FROM scratch image holding files,
// tagged repo:<hash of the files>, with entrypoint.
func buildScratchImage(cli *client.Client, repo string, files []imageFile, entrypoint string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.name))
		h.Write(f.data)
	}
	ref := repo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	return ref, buildTagged(ctx, cli, ref, files, entrypoint)
}

// buildTagged builds a FROM scratch image holding files, with entrypoint, tagged ref.
func buildTagged(ctx context.Context, cli *client.Client, ref string, files []imageFile, entrypoint string) error {
	dockerfile := "FROM scratch\n"
	for _, f := range files {
		dockerfile += "COPY " + f.name + " /" + f.name + "\n"
	}
	entries := append([]imageFile{{"Dockerfile", []byte(dockerfile + "ENTRYPOINT [\"" + entrypoint + "\"]\n"), 0o644}}, files...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true, Version: build.BuilderV1,
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("image %s missing after build: %w", ref, err)
	}
	return nil
}

// UniqueImage builds a FROM scratch image of the test agent (entrypoint /agent) plus a
// random file, so that its ID is new to the engine, tagged tag, and removes it when the
// test ends. For tests that remove or load images: the shared Image must stay.
func UniqueImage(tb testing.TB, cli *client.Client, tag string) string {
	tb.Helper()
	bin, err := os.ReadFile(Binary(tb))
	if err != nil {
		tb.Fatal(err)
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files := []imageFile{{"agent", bin, 0o755}, {"salt", []byte(hex.EncodeToString(salt)), 0o644}}
	if err := buildTagged(ctx, cli, tag, files, "/agent"); err != nil {
		tb.Fatalf("build image %s: %v", tag, err)
	}
	info, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { RemoveImage(cli, info.ID) })
	return info.ID
}

// RemoveImage removes an image by ID, its tags included; a missing image is no error.
func RemoveImage(cli *client.Client, id string) {
	_, _ = cli.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true, PruneChildren: true})
}

var (
	exampleOnce sync.Once
	exampleRef  string
	exampleErr  error
)

// ExampleImage returns the reference of a FROM scratch image holding the example solver
// agent at /agent and the example evaluator at /evaluator (examples/agents), building
// them (static) and the image once per test binary.
func ExampleImage(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	exampleOnce.Do(func() {
		exampleRef, exampleErr = goImage(cli, "evalmesh-example-agents", "/agent",
			[]GoBinary{{"agent", "./examples/agents/cmd/solver"}, {"evaluator", "./examples/agents/cmd/evaluator"}}, nil)
	})
	if exampleErr != nil {
		tb.Fatalf("build example agent image: %v", exampleErr)
	}
	return exampleRef
}

// GoBinary is a package of this module built static into a FROM scratch image at /Name.
type GoBinary struct {
	Name, Package string // Package relative to the module root, e.g. ./examples/agents/cmd/react
}

// GoImage builds (unless the engine has it: the tag is the content hash) a FROM scratch
// image of the static builds of bins plus the executables in files (name → bytes), each
// at /name, with entrypoint, and returns its image ID.
func GoImage(tb testing.TB, cli *client.Client, repo, entrypoint string, bins []GoBinary, files map[string][]byte) string {
	tb.Helper()
	ref, err := goImage(cli, repo, entrypoint, bins, files)
	if err != nil {
		tb.Fatalf("build image %s: %v", repo, err)
	}
	insp, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		tb.Fatalf("inspect image %s: %v", ref, err)
	}
	return insp.ID
}

func goImage(cli *client.Client, repo, entrypoint string, bins []GoBinary, files map[string][]byte) (string, error) {
	root := filepath.Join(srcDir(), "..", "..", "..")
	dir, err := os.MkdirTemp("", "evalmesh-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	var entries []imageFile
	for _, f := range bins {
		out := filepath.Join(dir, f.Name)
		if err := buildStatic(root, f.Package, out); err != nil {
			return "", err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return "", err
		}
		entries = append(entries, imageFile{f.Name, b, 0o755})
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		entries = append(entries, imageFile{name, files[name], 0o755})
	}
	imgMu.Lock()
	defer imgMu.Unlock()
	return buildScratchImage(cli, repo, entries, entrypoint)
}

func buildStatic(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

var (
	staticMu   sync.Mutex
	staticBins = map[string]string{}
)

// StaticBinary builds (once per test process) a static binary of pkg, relative to the module
// root (e.g. ./cmd/evalmesh-model-proxy), into a folder every uid can read, so a container
// running as nobody can execute it from a bind mount; it returns the binary's path.
func StaticBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	staticMu.Lock()
	defer staticMu.Unlock()
	if p, ok := staticBins[pkg]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "evalmesh-static-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	if err == nil {
		err = buildStatic(filepath.Join(srcDir(), "..", "..", ".."), pkg, out)
	}
	if err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	staticBins[pkg] = out
	return out
}
