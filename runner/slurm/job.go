package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// RunJob is the compute node's side of a task (`evalmesh slurm-job SPEC`, what the batch
// script execs): it runs the task's container through the node's Docker engine with the
// docker executor itself (the same container spec, isolation, limits, log copy and
// wall-clock deadline), the GPUs Slurm granted the job, and stops the container when Slurm
// signals the job (a cancel, or the time limit backstop). It then writes record.json next
// to the spec and returns the container's status as the job's exit status (a signal N as
// 128+N), so Slurm's accounting shows what the agent did.
func RunJob(specPath string, log io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(log, "evalmesh slurm-job: "+format+"\n", a...)
		return 125 // as docker run: the job command failed, not the agent
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		return fail("%v", err)
	}
	var spec jobSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail("spec %s: %v", specPath, err)
	}
	dir := filepath.Dir(specPath)
	cfg := spec.Config

	// Slurm names the granted GPUs by index (SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES); the
	// container gets them by NVML UUID where NVML answers, else by index.
	var src gpu.Source
	cfg.GPUs = nil
	if idx := grantedGPUs(); len(idx) > 0 {
		nv, err := gpu.System(nil)
		var inv gpu.Inventory
		if err == nil {
			src = nv
			inv, _ = nv.Inventory()
		}
		cfg.GPUs = gpuIDs(idx, inv)
	}

	opts := docker.Options{User: spec.User, StopGrace: time.Duration(spec.StopGrace * float64(time.Second)), NoInit: spec.NoInit}
	if spec.Runtime == docker.EnginePodman && os.Getenv("DOCKER_HOST") == "" {
		cli, err := client.NewClientWithOpts(client.WithHost(podmanHost()), client.WithAPIVersionNegotiation())
		if err != nil {
			return fail("podman: %v", err)
		}
		defer cli.Close()
		opts.Client = cli
	}
	ex, err := docker.New(opts)
	if err != nil {
		return fail("%v", err)
	}
	bg := context.Background()
	// A container of an earlier attempt of this task (a job command killed by SIGKILL).
	_ = ex.Destroy(bg, &runner.Handle{Driver: docker.DriverName, Config: cfg})

	sigCtx, stopSignals := signal.NotifyContext(bg, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	meter := gpu.StartMeter(src, cfg.GPUs)
	h, err := ex.Start(bg, cfg)
	if err != nil {
		return fail("%v", err)
	}
	res, err := ex.Wait(sigCtx, h)
	if sigCtx.Err() != nil {
		// Slurm cancels (or times out) the job: stop the container within KillWait.
		fmt.Fprintf(log, "evalmesh slurm-job: job signalled; stopping the container\n")
		if err := ex.Stop(bg, h, time.Duration(spec.StopGrace*float64(time.Second))); err != nil {
			fmt.Fprintf(log, "evalmesh slurm-job: stop: %v\n", err)
		}
		res, err = ex.Wait(bg, h)
	}
	if err != nil {
		_ = ex.Destroy(bg, h)
		return fail("%v", err)
	}
	t := meter.Finish()
	node := os.Getenv("SLURMD_NODENAME")
	if node == "" {
		node, _ = os.Hostname()
	}
	c := ex.Containment(h)
	rec := &record{Node: node, JobID: os.Getenv("SLURM_JOB_ID"), Exit: *res, Limits: c.Limits, User: spec.User, GPUs: cfg.GPUs, EnergyJoules: t.EnergyJoules, Engine: c.Engine}
	if err := writeRecord(dir, rec); err != nil {
		_ = ex.Destroy(bg, h)
		return fail("%v", err)
	}
	if err := ex.Destroy(bg, h); err != nil {
		fmt.Fprintf(log, "evalmesh slurm-job: %v\n", err)
	}
	switch {
	case res.Signal > 0:
		return 128 + res.Signal
	case res.ExitCode >= 0 && res.ExitCode < 256:
		return res.ExitCode
	}
	return 1
}

// podmanHost is podman's Docker-compatible socket for the job's user: rootful podman's for
// root, the user's own (rootless) otherwise.
func podmanHost() string {
	if os.Geteuid() == 0 {
		return "unix:///run/podman/podman.sock"
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = fmt.Sprintf("/run/user/%d", os.Geteuid())
	}
	return "unix://" + filepath.Join(dir, "podman", "podman.sock")
}

// grantedGPUs are the GPU indices Slurm gave this job.
func grantedGPUs() []string {
	for _, v := range []string{"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"} {
		if s := os.Getenv(v); s != "" && s != "NoDevFiles" {
			return strings.Split(s, ",")
		}
	}
	return nil
}

// gpuIDs maps Slurm's indices to NVML UUIDs through the node's inventory (indices that NVML
// does not list stay as they are: the engine's nvidia runtime accepts both).
func gpuIDs(idx []string, inv gpu.Inventory) []string {
	out := make([]string, 0, len(idx))
	for _, s := range idx {
		id := strings.TrimSpace(s)
		if n, err := strconv.Atoi(id); err == nil {
			for _, g := range inv.GPUs {
				if g.Index == n {
					id = g.UUID
				}
			}
		}
		out = append(out, id)
	}
	return out
}

// separateUID reports whether the container's uid:gid differs from root and the node's.
func separateUID(user string) bool {
	a, _, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(a)
	return err == nil && uid != 0 && uid != os.Geteuid()
}
