package node

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/runner"
)

// Agent images over IPFS (docs/agent-spec.md, "Images over IPFS"): `evalmesh agent add`
// adds the tar `docker save IMAGE-ID` writes as one UnixFS file (Add on the file: the CID
// `ipfs add --cid-version=1 FILE` prints) and writes its CID into the spec as image_cid; a
// node asked to run a spec whose image its engine lacks fetches that file from its peers
// (Pin: every block checked against its CID), and hands it to the engine through an
// ImageLoader, which loads it only if it is the spec's image, untagged.

// ImageLoader is what a node needs of a container engine to bring in an agent image;
// runner/docker.Executor implements it.
type ImageLoader interface {
	HasImage(ctx context.Context, id string) (bool, error)
	// LoadCheckedImage loads the tar open returns only if it is the untagged image wantID
	// (open is called more than once and must give the same bytes).
	LoadCheckedImage(ctx context.Context, wantID string, open func() (io.ReadCloser, error), progress func(done int64)) error
}

// ImageProgress receives the phases of EnsureAgentImage; nil fields are not called.
type ImageProgress struct {
	Transfer func(done, total int64) // bytes of the tar made local
	Load     func(done, total int64) // bytes of the tar the engine has read
}

// OpenFile opens the UnixFS file root, whose blocks must be local, for reading and
// seeking; size is the file's length.
func (n *Node) OpenFile(ctx context.Context, root cid.Cid) (r io.ReadSeekCloser, size int64, err error) {
	nd, err := n.local.Get(ctx, root)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w (fetch it first: evalmesh pin add %s)", root, err, root)
	}
	dr, err := uio.NewDagReader(ctx, nd, n.local)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: not a UnixFS file: %w", root, err)
	}
	return dr, int64(dr.Size()), nil
}

// EnsureAgentImage makes the spec's image present in the engine l: nothing to do when it
// is there already; otherwise the tar named by image_cid is fetched from the connected
// peers, pinned, and loaded only if it holds the image the spec names by ID and no tag
// (ImageLoader.LoadCheckedImage), so the engine's other images are never touched.
func (n *Node) EnsureAgentImage(ctx context.Context, spec *agentspec.Spec, l ImageLoader, p ImageProgress) error {
	if spec.Image == "" {
		return fmt.Errorf("agent %s has no image: the docker executor needs image: sha256:… (evalmesh agent add sets image_cid beside it)", spec.Name)
	}
	if has, err := l.HasImage(ctx, spec.Image); err != nil || has {
		return err
	}
	if spec.ImageCID == "" {
		return fmt.Errorf("agent %s: image %s is not in the local engine and the spec has no image_cid to fetch it by (run `evalmesh agent add SPEC.yaml` where the image is, or docker load it here)", spec.Name, spec.Image)
	}
	c, err := cid.Decode(spec.ImageCID)
	if err != nil {
		return fmt.Errorf("agent %s: image_cid %q: %w", spec.Name, spec.ImageCID, err)
	}
	t0 := time.Now() // wall clock: measured for the log line below
	if err := n.Pin(ctx, c, "agent-image "+spec.Name+" "+spec.Version, p.Transfer); err != nil {
		return fmt.Errorf("agent %s: fetch image tar %s: %w", spec.Name, c, err)
	}
	t1 := time.Now() // wall clock: measured for the log line below
	var size int64
	open := func() (io.ReadCloser, error) {
		r, s, err := n.OpenFile(ctx, c)
		size = s
		return r, err
	}
	var load func(int64)
	if p.Load != nil {
		load = func(d int64) { p.Load(d, size) }
	}
	if err := l.LoadCheckedImage(ctx, spec.Image, open, load); err != nil {
		return fmt.Errorf("agent %s: image tar %s: %w", spec.Name, c, err)
	}
	n.opts.Logf("agent %s: image %s from %s (%d bytes) fetched in %s, checked and loaded in %s",
		spec.Name, spec.Image, c, size, t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond)) // wall clock: measured for this log line
	return nil
}

// agentImageMu serialises image loads: the engine loads one tar at a time anyway, and two
// runs of one agent must not fetch and load its image twice.
var agentImageMu sync.Mutex

// ensureRunnerImage is the mesh's hook before a docker run of r: the agent's image is
// fetched by its image_cid and loaded when the engine lacks it.
func (n *Node) ensureRunnerImage(ctx context.Context, r *runner.Runner, spec *agentspec.Spec) error {
	if r.Executor != "docker" {
		return nil
	}
	l, ok := r.Executors["docker"].(ImageLoader)
	if !ok {
		return nil
	}
	agentImageMu.Lock()
	defer agentImageMu.Unlock()
	return n.EnsureAgentImage(ctx, spec, l, ImageProgress{})
}
