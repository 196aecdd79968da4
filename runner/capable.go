package runner

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// Capabilities is what a node can run, as its daemon found it (engine, host, GPUs): the
// input of CheckRunnable, which does no I/O. A nil map means "not known here" and checks
// nothing (the slurm executor's images live on its compute nodes).
type Capabilities struct {
	// Executor is the executor new runs use (Runner.Executor): process, docker or slurm.
	Executor string
	// Images are the agent images the node's engine holds, by the reference a spec names.
	Images map[string]bool
	// Programs are the agents' first command words that resolve on this host (the process
	// executor runs them directly).
	Programs map[string]bool
	// GPUs is how many GPUs runs may use on this node (its allow-list of its inventory).
	GPUs int
}

// CheckRunnable says why this node cannot run agent spec on a task that needs taskGPUs
// GPUs, or nil when it can. A node claims only slots it can run: a run it must fail at
// once costs the slot an attempt the network counts (docs/protocol-claims.md rule 6).
func CheckRunnable(spec *agentspec.Spec, taskGPUs int, c Capabilities) error {
	container := c.Executor == "docker" || c.Executor == "slurm"
	switch {
	case container && spec.Image == "":
		return fmt.Errorf("agent %s has no image, and this node's executor is %s (runner.executor): it runs agents in containers only", spec.Name, c.Executor)
	case container && c.Images != nil && !c.Images[spec.Image] && spec.ImageCID == "":
		return fmt.Errorf("agent %s: image %s is not on this node's engine, and the spec names no image_cid to fetch it from peers (load the image, e.g. `docker load`)", spec.Name, spec.Image)
	case !container && len(spec.Command) > 0 && spec.Command[0] != "evalmesh" && c.Programs != nil && !c.Programs[spec.Command[0]]:
		return fmt.Errorf("agent %s: command %q is not on this host, and this node's executor is %s (runner.executor): use a container executor for agents built as images", spec.Name, spec.Command[0], c.Executor)
	}
	need := max(taskGPUs, spec.Resources.GPUs)
	if m := spec.Model; m != nil {
		need = max(need, m.GPUs)
	}
	if need > c.GPUs {
		return fmt.Errorf("agent %s needs %d GPUs for this task; this node offers %d (runner.gpus and its inventory)", spec.Name, need, c.GPUs)
	}
	return nil
}

// imageHolder is what Capabilities needs of a container executor (docker.Executor).
type imageHolder interface {
	HasImage(ctx context.Context, id string) (bool, error)
}

// Capabilities finds what this node can run of specs (I/O: the engine's images, the host's
// programs, the GPU inventory), for CheckRunnable. An engine that does not answer about an
// image counts it present: the run then finds out, rather than a slot never being claimed.
func (r *Runner) Capabilities(ctx context.Context, specs []*agentspec.Spec) Capabilities {
	c := Capabilities{Executor: r.Executor}
	if inv, err := r.inventory(); err == nil {
		for n := len(inv.GPUs); n > 0; n-- {
			if _, err := gpu.Allocate(inv, r.AllowedGPUs, nil, n); err == nil {
				c.GPUs = n
				break
			}
		}
	}
	ex, _ := r.executor(r.Executor)
	switch holder, ok := ex.(imageHolder); {
	case ok && r.Executor == "docker":
		c.Images = map[string]bool{}
		for _, s := range specs {
			if s.Image == "" {
				continue
			}
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			has, err := holder.HasImage(ictx, s.Image)
			cancel()
			c.Images[s.Image] = has || err != nil
		}
	case ex != nil && !inContainer(ex):
		c.Programs = map[string]bool{}
		for _, s := range specs {
			if len(s.Command) > 0 {
				_, err := exec.LookPath(s.Command[0])
				c.Programs[s.Command[0]] = err == nil
			}
		}
	}
	return c
}
