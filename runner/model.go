package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner/gpu"
	"github.com/evalmesh/evalmesh/tasks"
)

// A model served beside an agent (docs/agents.md). The runner starts the model's container
// first, on its share of the run's GPUs, with no network at all (loopback only); waits until
// a probe run inside that container reports it ready; then starts the agent in the model's
// network namespace, so http://127.0.0.1:PORT/v1 is the one address the agent can reach.
// Both end before the submission is scored.

// DefaultModelReadySeconds bounds the wait for a model that names no ready_timeout_seconds.
const DefaultModelReadySeconds = 600

// ModelPolicy is the lab's policy for models (config runner.models).
type ModelPolicy struct {
	// Images are the model image IDs nodes will serve; empty means none.
	Images []string
	// Weights maps a weight folder's name to its host path.
	Weights map[string]string
	// MaxGPUs is the most GPUs one model may take (0: 1).
	MaxGPUs int
	// AllowNetwork says whether network: bridge is ever given.
	AllowNetwork bool
}

// CheckAgentPolicy says why this node will not run spec, or nil. A pure function of the spec
// and the policy: the mesh calls it before claiming a slot, the runner before starting.
func CheckAgentPolicy(spec *agentspec.Spec, pol ModelPolicy) error {
	if spec.WantsNetwork() && !pol.AllowNetwork {
		return fmt.Errorf("agent %s asks for network: bridge, which this lab's policy forbids (runner.allow_network: false)", spec.Name)
	}
	m := spec.Model
	if m == nil {
		return nil
	}
	allowed := false
	for _, img := range pol.Images {
		if img == m.Image {
			allowed = true
		}
	}
	if !allowed {
		return fmt.Errorf("agent %s: model image %s is not one this lab serves (runner.models.images)", spec.Name, m.Image)
	}
	maxGPUs := pol.MaxGPUs
	if maxGPUs <= 0 {
		maxGPUs = 1
	}
	if m.GPUs > maxGPUs {
		return fmt.Errorf("agent %s: model asks for %d GPUs, over this lab's %d (runner.models.max_gpus)", spec.Name, m.GPUs, maxGPUs)
	}
	for _, w := range m.Weights {
		if _, ok := pol.Weights[w.Name]; !ok {
			return fmt.Errorf("agent %s: weight folder %q is not one this lab serves (runner.models.weights)", spec.Name, w.Name)
		}
	}
	return nil
}

// WeightsDigest is a weight folder's digest: its UnixFS root CID, what
// `ipfs add -r -Q --cid-version=1 --only-hash DIR` prints. It reads every byte.
func WeightsDigest(ctx context.Context, dir string) (string, error) {
	c, err := tasks.Pack(ctx, dir, tasks.NewHashOnlyDAG(), tasks.PackOptions{Unchecked: true})
	if err != nil {
		return "", fmt.Errorf("weights %s: %w", dir, err)
	}
	return c.String(), nil
}

// PodExecutor is an Executor that can run a model beside a task: TaskConfig.JoinNetworkOf
// puts a task in another's network namespace, and Exec runs a probe inside a running task.
type PodExecutor interface {
	Executor
	// Exec runs argv inside the running task h and returns its exit code and output.
	Exec(ctx context.Context, h *Handle, argv []string) (exitCode int, output []byte, err error)
}

// Readiness says how StartModel checks that a model serves.
type Readiness struct {
	// Probe is the argv run inside the model's task (the URL already appended).
	Probe []string
	// Timeout bounds the wait; Interval is the pause between probes (0: 500 ms).
	Timeout, Interval time.Duration
}

// ErrModelNotReady means a model did not become ready in time or ended before it was.
var ErrModelNotReady = errors.New("model not ready")

// StartModel starts a model task, hands its handle to saved (so a crash during the wait
// leaves a handle to clean up) and waits until a probe inside it succeeds. On any failure
// the model is stopped and destroyed and the error wraps ErrModelNotReady where the model
// never served. The caller then starts its task with JoinNetworkOf = cfg.ID (StartPod does
// both), and stops the model with StopModel when the task ended.
func StartModel(ctx context.Context, ex PodExecutor, cfg TaskConfig, ready Readiness, saved func(*Handle) error) (*Handle, error) {
	h, err := ex.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start model: %w", err)
	}
	fail := func(err error) (*Handle, error) {
		StopModel(context.WithoutCancel(ctx), ex, h)
		return nil, err
	}
	if saved != nil {
		if err := saved(h); err != nil {
			return fail(err)
		}
	}
	interval := ready.Interval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, ready.Timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	last := "no probe has run"
	for {
		st, err := ex.Inspect(wctx, h)
		if err == nil && !st.Running {
			reason := "ended"
			if st.Exit != nil {
				reason = "exited with status " + fmt.Sprint(st.Exit.ExitCode)
			}
			return fail(fmt.Errorf("%w: the model %s before it was ready (see its log %s)", ErrModelNotReady, reason, cfg.LogPath))
		}
		code, out, err := ex.Exec(wctx, h, ready.Probe)
		if err == nil && code == 0 {
			return h, nil
		}
		switch {
		case err != nil && wctx.Err() == nil:
			last = err.Error()
		case err == nil:
			last = fmt.Sprintf("probe exited with status %d: %s", code, strings.TrimSpace(string(tail(out, 300))))
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			return fail(fmt.Errorf("%w: the model did not become ready within %s (%s; probe %q)", ErrModelNotReady, ready.Timeout, last, strings.Join(ready.Probe, " ")))
		case <-t.C:
		}
	}
}

// StopModel stops and removes a model task (idempotent; nil is a no-op).
func StopModel(ctx context.Context, ex Executor, h *Handle) {
	if h == nil {
		return
	}
	_ = ex.Stop(ctx, h, 0)
	_ = ex.Destroy(ctx, h)
}

// Pod is a model and the task that uses it.
type Pod struct {
	Model, Task *Handle
}

// StartPod starts model, waits until it is ready, then starts task in the model's network
// namespace (an agent, or an evaluator that needs a judge model). The caller waits for
// Task and then calls StopModel(Model).
func StartPod(ctx context.Context, ex PodExecutor, model TaskConfig, ready Readiness, task TaskConfig) (*Pod, error) {
	mh, err := StartModel(ctx, ex, model, ready, nil)
	if err != nil {
		return nil, err
	}
	task.JoinNetworkOf, task.Network = model.ID, false
	th, err := ex.Start(ctx, task)
	if err != nil {
		StopModel(context.WithoutCancel(ctx), ex, mh)
		return nil, err
	}
	return &Pod{Model: mh, Task: th}, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// modelTask is the model's task config for a run: no network, no task data, the weights
// read-only, its share of the GPUs, the run's limits.
func (r *Runner) modelTask(st *RunState, gpus []string, limits Limits) (TaskConfig, error) {
	m := st.Agent.Model
	dir := RunDir(r.Home, st.ID)
	env := map[string]string{"HOME": "/tmp"}
	for k, v := range m.Env {
		env[k] = v
	}
	cfg := TaskConfig{
		ID:      st.ID + "-model",
		Image:   m.Image,
		Command: append([]string(nil), m.Command...),
		Env:     env,
		GPUs:    gpus,
		Limits:  limits,
		LogPath: filepath.Join(dir, "logs", "model.log"),
	}
	for _, w := range m.Weights {
		src, ok := r.Models.Weights[w.Name]
		if !ok {
			return TaskConfig{}, fmt.Errorf("model weights %q: not in this lab's config (runner.models.weights)", w.Name)
		}
		if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
			return TaskConfig{}, fmt.Errorf("model weights %q: %s is not a folder on this node (runner.models.weights)", w.Name, src)
		}
		cfg.ExtraMounts = append(cfg.ExtraMounts, Mount{Source: src, Target: w.MountPath()})
	}
	return cfg, nil
}

// checkWeights verifies every weight folder against the digest the spec records and
// returns the digests in spec order.
func (r *Runner) checkWeights(ctx context.Context, m *agentspec.Model) error {
	for _, w := range m.Weights {
		src := r.Models.Weights[w.Name]
		got, err := r.weightsDigest(ctx, src)
		if err != nil {
			return err
		}
		if got != w.Digest {
			return fmt.Errorf("model weights %q at %s have digest %s, the spec records %s: the folder changed, or the spec names other weights", w.Name, src, got, w.Digest)
		}
	}
	return nil
}

func (r *Runner) weightsDigest(ctx context.Context, dir string) (string, error) {
	if r.WeightsDigest != nil {
		return r.WeightsDigest(ctx, dir)
	}
	// Hashing hundreds of GB per run would cost minutes: the digest is kept per process for
	// as long as the folder's stat fingerprint (names, sizes, mtimes) is unchanged. This
	// guards against a folder that drifted, not against a lab forging its own mtimes.
	fp, err := statFingerprint(dir)
	if err != nil {
		return "", fmt.Errorf("weights %s: %w", dir, err)
	}
	if d, ok := weightsCache.Load(dir + "\x00" + fp); ok {
		return d.(string), nil
	}
	d, err := WeightsDigest(ctx, dir)
	if err == nil {
		weightsCache.Store(dir+"\x00"+fp, d)
	}
	return d, err
}

var weightsCache sync.Map // dir NUL fingerprint -> digest

// statFingerprint is a sha256 over every entry's path, size and mtime under dir.
func statFingerprint(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%v\n", p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// startModel starts the run's model on its share of the GPUs and waits until it is ready,
// then points the agent's config at it: its network namespace, the remaining GPUs and the
// rest of the wall clock (the wait for the model counts against it).
func (r *Runner) startModel(ctx context.Context, ex Executor, st *RunState, agent *TaskConfig) error {
	m := st.Agent.Model
	pex, ok := ex.(PodExecutor)
	if !ok {
		return fmt.Errorf("agent %s names a model, which the %s executor cannot serve beside it (use the docker executor)", st.Agent.Name, ex.Name())
	}
	if m.GPUs > len(st.GPUs) {
		return fmt.Errorf("model %s needs %d GPUs, the run holds %d", m.Name, m.GPUs, len(st.GPUs))
	}
	if err := r.checkWeights(ctx, m); err != nil {
		return err
	}
	st.ModelGPUs = append([]string(nil), st.GPUs[:m.GPUs]...)
	agent.GPUs = append([]string(nil), st.GPUs[m.GPUs:]...)
	lim := agent.Limits
	// The runner stops the model when the agent ends; a model server runs many threads,
	// so the agent's pids limit is not its.
	lim.WallClock, lim.PIDs = 0, 0
	mcfg, err := r.modelTask(st, st.ModelGPUs, lim)
	if err != nil {
		return err
	}
	timeout := time.Duration(m.ReadyTimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = DefaultModelReadySeconds * time.Second
	}
	wall := agent.Limits.WallClock
	if wall > 0 {
		timeout = min(timeout, wall-r.now().Sub(st.Start))
	}
	probe := append(append([]string(nil), m.Probe...), m.ReadyURL())
	_, err = StartModel(ctx, pex, mcfg, Readiness{Probe: probe, Timeout: timeout}, func(h *Handle) error {
		st.ModelHandle = h
		return saveState(r.Home, st, r.now())
	})
	if err != nil {
		st.ModelEnded = true
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	st.ModelReady = r.now()
	if wall > 0 {
		agent.Limits.WallClock = wall - st.ModelReady.Sub(st.Start)
		if agent.Limits.WallClock <= 0 {
			r.endModel(ctx, ex, st)
			return fmt.Errorf("model %s: %w: ready only after the run's whole wall clock (%s)", m.Name, ErrModelNotReady, wall)
		}
	}
	recorded, err := r.startProxy(ctx, pex, st, mcfg, agent)
	if err != nil {
		r.endModel(ctx, ex, st)
		return err
	}
	if !recorded {
		agent.JoinNetworkOf, agent.Network = mcfg.ID, false
	}
	return saveState(r.Home, st, r.now())
}

// endModel stops the run's model (its log copied into logs/model.log) and removes it.
// Idempotent: a run without a model, or whose model already ended, is left alone.
func (r *Runner) endModel(ctx context.Context, ex Executor, st *RunState) {
	r.endProxy(ctx, ex, st) // first: its calls in flight still reach the model
	if st.ModelHandle == nil || st.ModelEnded {
		return
	}
	h := st.ModelHandle
	_ = ex.Stop(ctx, h, 0)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	_, _ = ex.Wait(wctx, h) // copies the model's whole log
	cancel()
	if err := ex.Destroy(context.WithoutCancel(ctx), h); err != nil {
		return // left for recovery: ModelEnded stays false
	}
	st.ModelEnded = true
	_ = saveState(r.Home, st, r.now())
}

// modelRun is the attested account of the run's model, nil for a run without one.
func modelRun(st *RunState, wall time.Duration) *attest.ModelRun {
	m := st.Agent.Model
	if m == nil {
		return nil
	}
	mr := &attest.ModelRun{Name: m.Name, Image: m.Image, GPUCount: len(st.ModelGPUs)}
	for _, w := range m.Weights {
		mr.Weights = append(mr.Weights, attest.WeightsDigest{Name: w.Name, Digest: w.Digest})
	}
	mr.AgentGPUCount = len(st.GPUs) - len(st.ModelGPUs)
	mr.GPUSeconds = gpu.GPUSeconds(wall, mr.GPUCount)
	mr.AgentGPUSeconds = gpu.GPUSeconds(wall, mr.AgentGPUCount)
	model := map[string]bool{}
	for _, g := range st.ModelGPUs {
		model[g] = true
	}
	// In the order of the run's GPUs, so the sums are the same on every replay.
	for _, g := range st.GPUs {
		e := st.Telemetry.EnergyJoulesByGPU[g]
		if model[g] {
			mr.EnergyJoules += e
		} else {
			mr.AgentEnergyJoules += e
		}
	}
	if st.ModelHandle != nil && !st.ModelReady.IsZero() {
		mr.ReadySeconds = max(st.ModelReady.Sub(st.ModelHandle.Started), 0).Seconds()
	}
	return mr
}
