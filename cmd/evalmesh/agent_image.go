package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
)

// `evalmesh agent add|pull`: agent images that travel over IPFS (docs/agent-spec.md,
// "Images over IPFS"), through the running daemon.

func init() {
	registerSub("agent", newAgentAddCmd)
	registerSub("agent", newAgentPullCmd)
}

func newAgentAddCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "add SPEC.yaml",
		Short: "Put an agent's image into the running node (docker save, add, pin) and write image_cid into the spec",
		Long: `Save the spec's image from the local Docker engine (docker save by image ID, so the tar
names no tag), add the tar to the running daemon as one UnixFS file (the CID
` + "`ipfs add --cid-version=1 FILE`" + ` prints), pin it, and write its CID into the spec as
image_cid (the spec's other fields and comments are kept). A spec with image_tar and no
image has the tar loaded first and image set. Labs without a registry then run the agent:
a node that lacks the image fetches it by image_cid from its peers, checks it block by
block, and loads it only if it is the spec's image, untagged (evalmesh agent pull does the
same by hand). The agent's ID changes: image_cid is part of it. On a terminal, bars show
save and add.

Example:
  evalmesh agent add examples/agents/specs/solver-docker.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			spec, err := agentspec.Load(args[0])
			if err != nil {
				return err
			}
			d, err := docker.New(docker.Options{})
			if err != nil {
				return err
			}
			loaded := ""
			if spec.Image == "" && spec.ImageTar != "" {
				if spec.Image, err = d.LoadImage(ctx, spec.ImageTar); err != nil {
					return err
				}
				loaded = spec.Image
			}
			if spec.Image == "" {
				return fmt.Errorf("%s: no image to add: set image: sha256:… (docker inspect --format '{{.Id}}' IMAGE) or image_tar", args[0])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			// The daemon reads the tar from disk; it is removed once added.
			tmp, err := os.MkdirTemp(h.Dir, ".agent-add-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			tarPath := filepath.Join(tmp, spec.Name+".image.tar")
			total, _ := d.ImageSize(ctx, spec.Image)
			if err := saveImageFile(cmd, d, spec.Image, tarPath, total); err != nil {
				return err
			}
			fi, err := os.Stat(tarPath)
			if err != nil {
				return err
			}
			bar := newProgress(cmd.ErrOrStderr(), "add")
			root, err := c.Add(ctx, tarPath, true, func(done int64) { bar.Set(done, fi.Size()) })
			bar.Finish()
			if err != nil {
				return err
			}
			if err := runner.SetSpecImage(args[0], loaded, root.String()); err != nil {
				return err
			}
			spec.ImageCID = root.String()
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]any{"image": spec.Image, "image_cid": root.String(), "bytes": fi.Size(), "agent": spec.CID()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "image %s added as %s (%d bytes); image_cid written to %s; agent ID now %s\n", spec.Image, root, fi.Size(), args[0], spec.CID())
			return nil
		},
	}
}

// saveImageFile writes `docker save ID` to path with a "save" bar.
func saveImageFile(cmd *cobra.Command, d *docker.Executor, id, path string, total int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	bar := newProgress(cmd.ErrOrStderr(), "save")
	err = d.SaveImage(cmd.Context(), id, f, func(done int64) { bar.Set(done, max(total, done)) })
	bar.Finish()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func newAgentPullCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "pull SPEC.yaml",
		Short: "Fetch an agent's image by its image_cid from peers and load it into the local engine",
		Long: `Make the spec's image present in the local Docker engine: nothing to do if it is there;
otherwise the running daemon fetches the tar named by image_cid from its connected peers
(every block checked against its CID) and pins it, and the tar is loaded only if it holds
exactly one image, untagged, whose ID is the spec's image: a tar of another image, or one
that would tag an image (and so could move a tag this engine already has), is refused and
the engine is left as it was. A daemon does this by itself before a docker run; this
command is the same by hand. On a terminal, bars show the transfer and the load.

Example:
  evalmesh agent pull solver-docker.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			spec, err := agentspec.Load(args[0])
			if err != nil {
				return err
			}
			d, err := docker.New(docker.Options{})
			if err != nil {
				return err
			}
			if spec.Image == "" {
				return fmt.Errorf("%s: no image: the spec must name its image by ID (image: sha256:…)", args[0])
			}
			if has, err := d.HasImage(ctx, spec.Image); err != nil {
				return err
			} else if has {
				if g.jsonOut {
					return printJSON(cmd.OutOrStdout(), map[string]any{"image": spec.Image, "image_cid": spec.ImageCID, "loaded": false})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "image %s is already in the local engine\n", spec.Image)
				return nil
			}
			if spec.ImageCID == "" {
				return fmt.Errorf("%s: image %s is not in the local engine and the spec has no image_cid (run `evalmesh agent add %s` where the image is)", args[0], spec.Image, args[0])
			}
			root, err := parseCIDArg(spec.ImageCID)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			bar := newProgress(cmd.ErrOrStderr(), "transfer")
			rep, err := c.PinFetch(ctx, root, "agent-image "+spec.Name+" "+spec.Version, func(done, total int64) { bar.Set(done, total) })
			bar.Finish()
			if err != nil {
				return err
			}
			var size int64
			open := func() (io.ReadCloser, error) {
				r, s, err := c.Cat(ctx, root)
				size = s
				return r, err
			}
			lbar := newProgress(cmd.ErrOrStderr(), "load")
			err = d.LoadCheckedImage(ctx, spec.Image, open, func(done int64) { lbar.Set(done, size) })
			lbar.Finish()
			if err != nil {
				return err
			}
			if g.jsonOut {
				out := map[string]any{"image": spec.Image, "image_cid": spec.ImageCID, "loaded": true, "bytes": size}
				addKept(out, rep)
				return printJSON(cmd.OutOrStdout(), out)
			}
			printKept(cmd.OutOrStdout(), rep)
			fmt.Fprintf(cmd.OutOrStdout(), "image %s loaded from %s\n", spec.Image, root)
			return nil
		},
	}
}

var _ node.ImageLoader = (*docker.Executor)(nil)
