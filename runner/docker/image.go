package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	errdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Agent images that travel over IPFS (docs/agent-spec.md, "Images over IPFS"): the tar
// `docker save IMAGE-ID` writes, added to a node as one UnixFS file. A node that loads such
// a tar from a peer trusts nothing in it: CheckImageTar reads it first (its manifest, its
// config's digest, every name that could tag an image), and LoadCheckedImage loads it only
// when it is one untagged image whose ID is the spec's, so a tar can neither load another
// image nor move a tag the node already has.

// maxImageMetaFile bounds the tar entries CheckImageTar hashes or decodes (configs,
// manifests, indexes); layers are never read, only skipped.
const maxImageMetaFile = 8 << 20

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// HasImage reports whether the engine holds the image id (sha256:…).
func (e *Executor) HasImage(ctx context.Context, id string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, id)
	if err == nil {
		return true, nil
	}
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("docker executor: inspect image %s: %w", id, err)
}

// ImageSize is the engine's size of the image id (the tar `docker save` writes is about
// this big), for a progress bar's total.
func (e *Executor) ImageSize(ctx context.Context, id string) (int64, error) {
	info, err := e.cli.ImageInspect(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("docker executor: inspect image %s: %w", id, err)
	}
	return info.Size, nil
}

// SaveImage writes `docker save ID` to w: by image ID, so the tar names no repository or
// tag. progress, if set, gets the bytes written so far.
func (e *Executor) SaveImage(ctx context.Context, id string, w io.Writer, progress func(done int64)) error {
	if !digestRE.MatchString(id) {
		return fmt.Errorf("docker executor: save image %q: want an image ID sha256:<64 hex> (docker inspect --format '{{.Id}}' IMAGE)", id)
	}
	rc, err := e.cli.ImageSave(ctx, []string{id})
	if err != nil {
		return fmt.Errorf("docker executor: save image %s: %w", id, err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, &countingReader{r: rc, progress: progress}); err != nil {
		return fmt.Errorf("docker executor: save image %s: %w", id, err)
	}
	return nil
}

// LoadCheckedImage loads the image tar that open returns, only if it is the untagged image
// wantID: the tar is read twice (open must return the same bytes each time; a DAG read by
// CID does), first by CheckImageTar, then by the engine. The image the engine reports
// loading must be wantID, else it is removed again and an error returned. An image the node
// already has is never touched: the tar names no tag, and its one image is new to the
// engine (the caller loads only an image the engine lacks; if it is there, nothing loads).
// progress, if set, gets the tar bytes the engine has read so far.
func (e *Executor) LoadCheckedImage(ctx context.Context, wantID string, open func() (io.ReadCloser, error), progress func(done int64)) error {
	if has, err := e.HasImage(ctx, wantID); err != nil {
		return err
	} else if has {
		return nil
	}
	r, err := open()
	if err != nil {
		return err
	}
	err = CheckImageTar(r, wantID)
	r.Close()
	if err != nil {
		return err
	}
	if r, err = open(); err != nil {
		return err
	}
	defer r.Close()
	resp, err := e.cli.ImageLoad(ctx, &countingReader{r: r, progress: progress}, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("docker executor: load image %s: %w", wantID, err)
	}
	defer resp.Body.Close()
	id, ref, err := parseLoadOutput(resp.Body)
	if err != nil {
		return fmt.Errorf("docker executor: load image %s: %w", wantID, err)
	}
	if id != wantID || ref != "" {
		// CheckImageTar let through a tar the engine read otherwise: undo what is new.
		if id != "" {
			_, _ = e.cli.ImageRemove(context.WithoutCancel(ctx), id, image.RemoveOptions{})
		}
		return fmt.Errorf("docker executor: the image tar loaded %q (tag %q), not the spec's image %s: refused and removed", id, ref, wantID)
	}
	return nil
}

// ImageTarError is an image tar CheckImageTar refuses.
type ImageTarError struct{ Reason string }

func (e *ImageTarError) Error() string { return "image tar refused: " + e.Reason }

// CheckImageTar reads a `docker save` tar (the engine's legacy layout: manifest.json, or
// the OCI layout: index.json, blobs/sha256/…) and returns nil only if it holds exactly one
// image, whose config hashes to wantID, and names no repository or tag anywhere the engine
// would read one (manifest.json RepoTags, a `repositories` file, index.json name
// annotations). Entry names are cleaned the way the engine extracts them; a name given
// twice, absolute or leaving the archive is refused. Layers are skipped, not read, when r
// can seek. It is a decoder of outside input: every failure is an *ImageTarError.
func CheckImageTar(r io.Reader, wantID string) error {
	refuse := func(format string, args ...any) error { return &ImageTarError{Reason: fmt.Sprintf(format, args...)} }
	want, ok := strings.CutPrefix(wantID, "sha256:")
	if !ok || !digestRE.MatchString(wantID) {
		return refuse("the spec's image %q is not an image ID sha256:<64 hex>", wantID)
	}
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	digests := map[string]string{} // small regular files: name -> sha256 hex
	var manifest, index []byte
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return refuse("not a tar: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return refuse("entry %q leaves the archive", hdr.Name)
		}
		if seen[name] {
			return refuse("entry %q appears twice (which one the engine reads is not this check's choice)", name)
		}
		seen[name] = true
		if name == "repositories" {
			return refuse("it has a `repositories` file, which tags images on load (save the image by ID: docker save sha256:…)")
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size > maxImageMetaFile {
			if name == "manifest.json" || name == "index.json" {
				return refuse("%s is not a regular file of at most %d bytes", name, maxImageMetaFile)
			}
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return refuse("read %s: %v", name, err)
		}
		sum := sha256.Sum256(data)
		digests[name] = hex.EncodeToString(sum[:])
		switch name {
		case "manifest.json":
			manifest = data
		case "index.json":
			index = data
		}
	}
	if manifest == nil {
		return refuse("no manifest.json: not a `docker save` tar")
	}
	// The engine decodes these with encoding/json too, so both read the same values.
	var m []struct {
		Config   string
		RepoTags []string
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return refuse("manifest.json: %v", err)
	}
	if len(m) != 1 {
		return refuse("manifest.json lists %d images, want exactly 1", len(m))
	}
	if len(m[0].RepoTags) > 0 {
		return refuse("manifest.json tags the image as %s: a tar that tags could move a tag this node already has (save the image by ID: docker save sha256:…)", strings.Join(m[0].RepoTags, ", "))
	}
	cfg := path.Clean(m[0].Config)
	got, ok := digests[cfg]
	if !ok {
		return refuse("manifest.json's config %q is not a file in the tar", m[0].Config)
	}
	if got != want {
		return refuse("the image in it is sha256:%s, not the spec's image %s", got, wantID)
	}
	if index != nil {
		var ix struct {
			Manifests []struct {
				Annotations map[string]string
			}
		}
		if err := json.Unmarshal(index, &ix); err != nil {
			return refuse("index.json: %v", err)
		}
		if len(ix.Manifests) != 1 {
			return refuse("index.json lists %d images, want exactly 1", len(ix.Manifests))
		}
		for k, v := range ix.Manifests[0].Annotations {
			if k == "io.containerd.image.name" || k == "org.opencontainers.image.ref.name" {
				return refuse("index.json names the image %q (%s): a tar that tags could move a tag this node already has", v, k)
			}
		}
	}
	return nil
}

// IsImageTarRefused reports whether err is a refusal by CheckImageTar.
func IsImageTarRefused(err error) bool {
	var e *ImageTarError
	return errors.As(err, &e)
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if n > 0 && c.progress != nil {
		c.progress(c.n)
	}
	return n, err
}
