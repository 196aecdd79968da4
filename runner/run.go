package runner

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/gpu"
	"github.com/evalmesh/evalmesh/runner/modelproxy"
	"github.com/evalmesh/evalmesh/tasks"
)

// LocalCampaign is the campaign of a run started by hand (`evalmesh run`), outside any
// signed campaign.
const LocalCampaign = "local"

// Runner executes runs for one node home. Fill the fields, then call Run; after a restart
// call Recover before starting new runs. Safe for concurrent Run calls.
type Runner struct {
	Home home.Home
	// Executors by name ("docker", "process"); Executor picks the one new runs use.
	Executors map[string]Executor
	Executor  string
	// GPUs is the NVML source; nil runs CPU-only. AllowedGPUs is the lab's allow-list.
	GPUs        gpu.Source
	AllowedGPUs []string
	// AllowNetwork is the lab's policy: an agent gets a network only if its spec asks and
	// this allows.
	AllowNetwork bool
	// Models is the lab's model policy (config runner.models): which model images and
	// weight folders this node serves. WeightsDigest, if set, replaces WeightsDigest (a
	// cache; tests).
	Models        ModelPolicy
	WeightsDigest func(ctx context.Context, dir string) (string, error)
	// ModelProxy is the static recording proxy binary (transcript.go) put between an agent
	// and its model; "" means evalmesh-model-proxy beside this executable, if there is one
	// (without it, runs with a model carry no transcript). ProxyLimits bound the recording
	// (zero fields: modelproxy.DefaultLimits).
	ModelProxy  string
	ProxyLimits modelproxy.Limits
	// Key signs attestations; Cert is the node's lab certificate; Lab its lab ID. Without a
	// Cert a run is refused unless SelfSigned (attestations then count only where a trust
	// file lists the node key itself). Trust, if set, is the trust store the preflight checks
	// the certificate against (its lab listed, not revoked).
	Key crypto.PrivKey
	// DrawKey is the lab's draw key (HOME/draw.key), set where the network document names
	// it for this lab: re-scorer and audit draws are made with it, not with Key, because
	// there they count only under it (attest.DrawKeys). nil draws with Key.
	DrawKey    crypto.PrivKey
	Cert       *attest.NodeCert
	Lab        string
	SelfSigned bool
	Trust      *attest.TrustStore
	// Keys finds the data keys of sealed bundles this lab was granted (sealed.go); nil: a
	// sealed bundle's runs wait for a key.
	Keys KeySource
	// Unscored says whether this lab signs runs of the sealed bundle with this CID without a
	// score: the network document names the labs that score it and this lab is not one
	// (ledger.scorers, sealed.go). nil: every run is scored here, or waits for a key.
	Unscored func(bundleCID string) bool
	// SelfExe replaces a command's first word "evalmesh" for the process executor (so the
	// example agents need no build); empty means os.Executable().
	SelfExe string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// TestFabricate, set only by the daemon's hidden --test-fabricate (a dishonest lab in
	// the tests), rewrites a run's output after its agent ended and before it is scored;
	// never for an audit.
	TestFabricate func(outputDir string, b *tasks.Bundle) error
	// TestForgeTranscript, set only by the daemon's hidden --test-forge-transcript (a
	// dishonest lab in the tests), replaces a run's recorded calls with the ones it returns
	// before the transcript is built and signed (its totals are summed again, so the forged
	// document is well formed); never for an audit.
	TestForgeTranscript func(calls []attest.TranscriptCall) []attest.TranscriptCall
	// PollInterval is how often GPU telemetry and Progress are sampled; 0 means 2 s.
	PollInterval time.Duration
	// Progress, if set, is called at every phase change and poll (the CLI's status line).
	Progress func(Progress)
	// StopGrace is how long an agent gets between SIGTERM and SIGKILL on cancellation.
	StopGrace time.Duration

	invOnce sync.Once
	// certMu guards Cert once the runner is in use: a daemon swaps in a renewed
	// certificate (SetCert) while runs sign.
	certMu sync.RWMutex
	inv    gpu.Inventory
	invErr error
}

// Progress is a snapshot for a live status line.
type Progress struct {
	RunID   string
	Phase   Phase
	Elapsed time.Duration
	// GPUUtil is the mean utilisation of the run's GPUs at the last poll (-1: no GPUs).
	GPUUtil float64
}

// Request names one slot to run.
type Request struct {
	TaskDir string
	// TaskCID is the bundle's CID; empty means compute it (tasks.Pack into memory).
	TaskCID string
	Agent   *agentspec.Spec
	Seed    int
	// Campaign is the campaign CID, or "" for LocalCampaign.
	Campaign string
	// Attempt is the attempt number signed into the attestation (0 means 1): the claim
	// machine numbers a slot's runs so a retry is never read as equivocation.
	Attempt int
	// Witness is the ID of another lab's witness record of the campaign, signed into the
	// attestation (attest.RunPredicate.Witness); "" for none.
	Witness string
	// Audit re-executes another lab's run of the slot (audit.go): Attempt is the audited
	// run's, and nothing is signed: the Outcome carries the unsigned statement.
	Audit bool
}

// Outcome is a finished run.
type Outcome struct {
	RunID         string              `json:"run_id"`
	AttestationID string              `json:"attestation_id"`
	Valid         bool                `json:"valid"`
	Score         *float64            `json:"score"`
	Metric        string              `json:"metric"`
	InvalidReason string              `json:"invalid_reason,omitempty"`
	Predicate     attest.RunPredicate `json:"predicate"`
	Envelope      []byte              `json:"-"`
	// Statement is an audit's unsigned statement (Request.Audit); Envelope is then nil.
	Statement []byte `json:"-"`
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Runner) inventory() (gpu.Inventory, error) {
	r.invOnce.Do(func() {
		if r.GPUs == nil {
			r.inv = gpu.Inventory{CPUOnly: true, GPUs: []gpu.Info{}}
			return
		}
		r.inv, r.invErr = r.GPUs.Inventory()
	})
	return r.inv, r.invErr
}

func (r *Runner) executor(name string) (Executor, error) {
	ex, ok := r.Executors[name]
	if !ok || ex == nil {
		return nil, fmt.Errorf("executor %q is not available on this node (have %s)", name, strings.Join(sortedKeys(r.Executors), ", "))
	}
	return ex, nil
}

func (r *Runner) progress(st *RunState, util float64) {
	if r.Progress != nil {
		r.Progress(Progress{RunID: st.ID, Phase: st.Phase, Elapsed: r.now().Sub(st.Start), GPUUtil: util})
	}
}

// newRunID is sortable by start time and unique: UTC time plus 8 random hex digits.
func newRunID(t time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Run executes one slot end to end: GPUs, agent task, evaluation apart from the agent,
// signed attestation. Errors that leave no attestation (bad bundle, no free GPU, executor
// failure) are returned; an agent that crashes, times out or writes a bad submission is an
// attested invalid run, not an error.
func (r *Runner) Run(ctx context.Context, req Request) (*Outcome, error) {
	if req.Agent == nil {
		return nil, errors.New("run: no agent spec")
	}
	if err := req.Agent.Validate(); err != nil {
		return nil, err
	}
	b, err := tasks.Open(req.TaskDir)
	if err != nil {
		return nil, err
	}
	if _, err := r.executor(r.Executor); err != nil {
		return nil, err
	}
	if m := req.Agent.Model; m != nil {
		pol := r.Models
		pol.AllowNetwork = r.AllowNetwork
		if err := CheckAgentPolicy(req.Agent, pol); err != nil {
			return nil, err
		}
	}
	if ex, _ := r.executor(r.Executor); inContainer(ex) && req.Agent.Image == "" {
		return nil, fmt.Errorf("agent %s has no image: the %s executor needs image: sha256:… (or use --executor process)", req.Agent.Name, r.Executor)
	}
	// Fail before the work: a run whose attestation would be refused is not started.
	if err := r.CheckSigning(time.Duration(b.Meta.Limits.WallClockSeconds) * time.Second); err != nil {
		return nil, err
	}
	taskDir, err := filepath.Abs(req.TaskDir)
	if err != nil {
		return nil, err
	}
	taskCID := req.TaskCID
	if taskCID == "" {
		if taskCID, err = BundleCID(ctx, taskDir); err != nil {
			return nil, err
		}
	}
	campaign := req.Campaign
	if campaign == "" {
		campaign = LocalCampaign
	}
	inv, err := r.inventory()
	if err != nil {
		return nil, err
	}
	need := b.Meta.Limits.GPUs
	if need == 0 {
		need = req.Agent.Resources.GPUs
	}
	if m := req.Agent.Model; m != nil {
		need = max(need, m.GPUs) // the model takes the first m.GPUs, the agent the rest
	}

	start := r.now()
	st := &RunState{
		ID: newRunID(start), Phase: PhaseStarting, Executor: r.Executor,
		TaskDir: taskDir, TaskCID: taskCID, Campaign: campaign,
		Agent: *req.Agent, AgentCID: req.Agent.CID(), Seed: req.Seed, Start: start,
		Attempt: req.Attempt, Witness: req.Witness, Audit: req.Audit,
	}
	// Allocate under the home's lock, and record the GPUs before releasing it.
	unlock, err := lockRuns(r.Home)
	if err != nil {
		return nil, err
	}
	runs, err := ListRuns(r.Home)
	if err == nil {
		st.GPUs, err = gpu.Allocate(inv, r.AllowedGPUs, busyGPUs(runs), need)
	}
	if err == nil && !req.Audit {
		// The claim machine's number, unless this node already signed that attempt (or a
		// later one) of the slot: a second attestation of one attempt reads as equivocation.
		st.Attempt = max(req.Attempt, r.nextAttempt(runs, attest.Slot{Campaign: campaign, Task: taskCID, Agent: st.AgentCID, Seed: st.Seed}))
	}
	if err == nil {
		err = r.makeRunDir(st)
	}
	var release func()
	if err == nil {
		release, err = ownRun(r.Home, st.ID)
	}
	if err == nil {
		if err = saveState(r.Home, st, r.now()); err != nil {
			release()
		}
	}
	unlock()
	if err != nil {
		return nil, fmt.Errorf("run %s/%s: %w", b.Meta.Name, req.Agent.Name, err)
	}
	defer release()
	return r.drive(ctx, st, b, nil)
}

func (r *Runner) makeRunDir(st *RunState) error {
	dir := RunDir(r.Home, st.ID)
	for _, d := range []string{"workspace", "output", "logs", "eval"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// fail marks the run failed (no attestation) and frees its GPUs.
func (r *Runner) fail(st *RunState, err error) error {
	st.Phase, st.Error = PhaseFailed, err.Error()
	if serr := saveState(r.Home, st, r.now()); serr != nil {
		return errors.Join(err, serr)
	}
	r.progress(st, -1)
	return err
}

// drive moves a run from its saved phase to the end. meter is non-nil when resuming.
func (r *Runner) drive(ctx context.Context, st *RunState, b *tasks.Bundle, meter *gpu.Meter) (*Outcome, error) {
	ex, err := r.executor(st.Executor)
	if err != nil {
		return nil, r.fail(st, err)
	}
	dir := RunDir(r.Home, st.ID)
	if st.Phase == PhaseStarting {
		closePrivate(b)
		meter = gpu.StartMeter(r.GPUs, st.GPUs)
		st.Telemetry = meter.T
		cfg, err := r.agentTask(st, b, ex)
		if err != nil {
			return nil, r.fail(st, err)
		}
		if st.Agent.Model != nil {
			if err := r.startModel(ctx, ex, st, &cfg); err != nil {
				if aborted(ctx) {
					return nil, r.abort(ctx, ex, st)
				}
				return nil, r.fail(st, err)
			}
		}
		h, err := ex.Start(ctx, cfg)
		if err != nil {
			if aborted(ctx) {
				return nil, r.abort(ctx, ex, st)
			}
			r.endModel(ctx, ex, st)
			return nil, r.fail(st, fmt.Errorf("start agent %s: %w", st.Agent.Name, err))
		}
		st.AgentHandle, st.Phase = h, PhaseAgent
		if err := saveState(r.Home, st, r.now()); err != nil {
			_ = ex.Stop(context.Background(), h, 0)
			_ = ex.Destroy(context.Background(), h)
			r.endModel(context.Background(), ex, st)
			return nil, r.fail(st, err)
		}
	}
	if st.Phase == PhaseAgent {
		if meter == nil {
			meter = gpu.ResumeMeter(r.GPUs, st.GPUs, st.Telemetry)
		}
		exit, err := r.waitAgent(ctx, ex, st, meter)
		if aborted(ctx) {
			return nil, r.abort(ctx, ex, st)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // the run stays in PhaseAgent: a restarted node re-attaches
		}
		if err != nil {
			// The executor lost the task: not the agent's doing, so no attestation.
			_ = ex.Destroy(context.Background(), st.AgentHandle)
			r.endModel(context.Background(), ex, st)
			return nil, r.fail(st, fmt.Errorf("agent task: %w", err))
		}
		st.Telemetry = meter.Finish()
		st.AgentExit = exit
		// What the executor measured of the agent's own use, before its task is removed
		// (merged with the samples taken while it ran: a container's cgroup and stats go
		// with its exit).
		r.sampleAgent(ctx, ex, st)
		exit.PIDsLimited = st.AgentPIDsLimitHits > 0
		// The agent's task is gone before private/ is touched.
		if err := ex.Destroy(ctx, st.AgentHandle); err != nil {
			return nil, r.fail(st, fmt.Errorf("destroy agent task: %w", err))
		}
		// The model goes with its agent, before anything is scored.
		r.endModel(ctx, ex, st)
		if r.TestFabricate != nil && !st.Audit {
			if err := r.TestFabricate(filepath.Join(dir, "output"), b); err != nil {
				return nil, r.fail(st, fmt.Errorf("test fabricate: %w", err))
			}
		}
		st.Phase = PhaseEvaluating
		if err := saveState(r.Home, st, r.now()); err != nil {
			return nil, r.fail(st, err)
		}
		r.progress(st, meter.Last)
	}
	if st.Phase == PhaseEvaluating {
		r.endModel(ctx, ex, st) // a node that died between the agent's end and its model's
		if st.EvalHandle != nil {
			// An evaluator of an earlier process: its result was never recorded; run anew.
			_ = ex.Stop(ctx, st.EvalHandle, 0)
			_ = ex.Destroy(ctx, st.EvalHandle)
			st.EvalHandle = nil
			st.EvalAttempt++
		}
		if _, err := os.Stat(filepath.Join(dir, statementFile)); err != nil {
			if err := r.evaluateAndState(ctx, ex, st, b); err != nil {
				if aborted(ctx) {
					return nil, r.abort(ctx, ex, st)
				}
				if ctx.Err() != nil {
					return nil, ctx.Err() // left in PhaseEvaluating for Recover
				}
				var nk *NoKeyError
				if errors.As(err, &nk) {
					return nil, r.awaitKey(st, nk)
				}
				return nil, r.fail(st, err)
			}
		}
		st.Phase = PhaseSigning
		if err := saveState(r.Home, st, r.now()); err != nil {
			return nil, r.fail(st, err)
		}
		r.progress(st, -1)
	}
	if st.Phase == PhaseSigning || st.Phase == PhaseDone {
		if st.Audit {
			return r.auditOutcome(st)
		}
		return r.sign(st)
	}
	return nil, fmt.Errorf("run %s: phase %q: %s", st.ID, st.Phase, st.Error)
}

// closePrivate takes group and other permissions off the bundle's private/ folder before
// an agent starts: an agent under a uid of its own then cannot read it even by its path.
// Best effort (a bundle this node does not own keeps its modes; the attestation says how
// the agent was isolated either way).
func closePrivate(b *tasks.Bundle) {
	if fi, err := os.Lstat(b.PrivateDir()); err == nil && fi.IsDir() && fi.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(b.PrivateDir(), fi.Mode().Perm()&0o700)
	}
}

// resolveCommand maps a first word "evalmesh" to this binary for the process executor.
func (r *Runner) resolveCommand(cmd []string, ex Executor) ([]string, error) {
	out := append([]string(nil), cmd...)
	if inContainer(ex) || len(out) == 0 || out[0] != "evalmesh" {
		return out, nil
	}
	self := r.SelfExe
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("cannot find this evalmesh binary to run %q: %w", strings.Join(cmd, " "), err)
		}
	}
	out[0] = self
	return out, nil
}

func (r *Runner) agentTask(st *RunState, b *tasks.Bundle, ex Executor) (TaskConfig, error) {
	dir := RunDir(r.Home, st.ID)
	cmd, err := r.resolveCommand(st.Agent.Command, ex)
	if err != nil {
		return TaskConfig{}, err
	}
	env := map[string]string{}
	for k, v := range st.Agent.Env {
		env[k] = v
	}
	env[EnvSeed] = fmt.Sprint(st.Seed)
	if m := st.Agent.Model; m != nil {
		env[agentspec.EnvOpenAIBaseURL] = m.BaseURL()
		env[agentspec.EnvModelName], env[agentspec.EnvOpenAIModel] = m.Name, m.Name
		if _, ok := env[agentspec.EnvOpenAIAPIKey]; !ok {
			env[agentspec.EnvOpenAIAPIKey] = "evalmesh-local-model"
		}
	}
	lim := b.Meta.Limits
	limits := Limits{
		MemoryBytes: lim.MemoryBytes,
		NanoCPUs:    int64(lim.CPUs * 1e9),
		PIDs:        lim.PIDs,
		WallClock:   time.Duration(lim.WallClockSeconds) * time.Second,
		OutputBytes: cmp.Or(lim.OutputBytes, DefaultOutputBytes),
	}
	if m := st.Agent.Resources.MemoryBytes; m > 0 && (limits.MemoryBytes == 0 || m < limits.MemoryBytes) {
		limits.MemoryBytes = m
	}
	if c := int64(st.Agent.Resources.CPUs) * 1e9; c > 0 && (limits.NanoCPUs == 0 || c < limits.NanoCPUs) {
		limits.NanoCPUs = c
	}
	return TaskConfig{
		ID:           st.ID + "-agent",
		Image:        st.Agent.Image,
		Command:      cmd,
		Env:          env,
		PublicDir:    b.PublicDir(),
		WorkspaceDir: filepath.Join(dir, "workspace"),
		OutputDir:    filepath.Join(dir, "output"),
		PromptPath:   b.PromptPath(),
		MetaPath:     filepath.Join(b.Dir, tasks.MetaFile),
		GPUs:         st.GPUs,
		Network:      st.Agent.WantsNetwork() && r.AllowNetwork,
		Limits:       limits,
		LogPath:      filepath.Join(dir, "logs", "agent.log"),
	}, nil
}

// waitAgent waits for the agent while polling telemetry. If ctx ends first the task is left
// running (a restarted node re-attaches to it) and ctx's error is returned.
func (r *Runner) waitAgent(ctx context.Context, ex Executor, st *RunState, meter *gpu.Meter) (*ExitResult, error) {
	type result struct {
		exit *ExitResult
		err  error
	}
	done := make(chan result, 1)
	go func() {
		e, err := ex.Wait(ctx, st.AgentHandle)
		done <- result{e, err}
	}()
	interval := r.PollInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	// The agent's own use is also sampled early (nextEarlySample): a container's cgroup
	// (pids-limit hits) and stats vanish with it, and many agents that misbehave do it in
	// their first seconds.
	started := time.Now()
	early := min(earlyFirstSample, interval)
	et := time.NewTimer(early)
	defer et.Stop()
	util := func() float64 {
		if len(st.GPUs) == 0 {
			return -1
		}
		return meter.Last
	}
	meter.Poll()
	r.progress(st, util())
	for {
		select {
		case res := <-done:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return res.exit, res.err
		case <-t.C:
			meter.Poll()
			st.Telemetry = meter.T
			r.sampleAgent(ctx, ex, st)
			r.progress(st, util())
		case <-et.C:
			r.sampleAgent(ctx, ex, st)
			if early = nextEarlySample(early, time.Since(started), interval); early > 0 {
				et.Reset(early)
			}
		}
	}
}

// The early samples of an agent's use: the first at earlyFirstSample, then at doubling gaps
// up to earlyMaxGap, then every earlyMaxGap until earlyWindow has passed.
const (
	earlyFirstSample = 100 * time.Millisecond
	earlyMaxGap      = 500 * time.Millisecond
	earlyWindow      = 10 * time.Second
)

// nextEarlySample is the wait before the next early sample after one taken elapsed into the
// agent's run, the last wait having been prev; 0 means no more (the poll interval's ticker
// is as frequent, or the window is over). Why a cap on the gap: doubling up to the 2 s
// default left a gap of 1.6 s around the second second, and a fork bomb that hit its pids
// limit late under load and gave up a second later ended between two samples, so its
// attestation missed why it ended (TestRunDockerForkBombAttestedAtDefaultPoll, seen in CI).
func nextEarlySample(prev, elapsed, interval time.Duration) time.Duration {
	next := min(2*prev, earlyMaxGap)
	if next >= interval || elapsed+next > earlyWindow {
		return 0
	}
	return next
}

// sampleAgent keeps the largest peak memory, CPU time and pids-limit count the executor
// reports for the agent's task.
func (r *Runner) sampleAgent(ctx context.Context, ex Executor, st *RunState) {
	ts, err := ex.Inspect(ctx, st.AgentHandle)
	if err != nil || ts == nil {
		return
	}
	st.AgentPeakMemory = max(st.AgentPeakMemory, ts.PeakMemoryBytes)
	st.AgentCPUSeconds = max(st.AgentCPUSeconds, ts.CPUSeconds)
	st.AgentPIDsLimitHits = max(st.AgentPIDsLimitHits, ts.PIDsLimitHits)
	st.AgentGPUSeconds = max(st.AgentGPUSeconds, ts.GPUSeconds)
	st.AgentEnergyJoules = max(st.AgentEnergyJoules, ts.EnergyJoules)
}

// exitReason says in words how the agent ended.
func exitReason(e *ExitResult) string {
	switch {
	case e == nil:
		return "agent did not run"
	case e.TimedOut:
		return "killed at the task's wall-clock limit"
	case e.OOMKilled:
		return "killed for exceeding its memory limit"
	case e.Err != "":
		return "executor: " + e.Err
	case e.Signal != 0:
		return fmt.Sprintf("killed by signal %d", e.Signal) + pidsNote(e)
	case e.ExitCode != 0:
		return fmt.Sprintf("exited with status %d", e.ExitCode) + pidsNote(e)
	}
	return ""
}

func pidsNote(e *ExitResult) string {
	if e.PIDsLimited {
		return " after its pids limit refused new processes"
	}
	return ""
}

// evaluateAndState scores the submission and writes the run's statement.json, in three
// phases: evaluate, store the subjects (submission and logs) by CID, and write the
// statement of the run predicate.
func (r *Runner) evaluateAndState(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle) error {
	ev, err := r.evaluate(ctx, ex, st, b)
	if err != nil {
		return err
	}
	subjects, err := r.storeSubjects(st, b, ev)
	if err != nil {
		return err
	}
	pred, err := r.runPredicate(ex, st, b, ev)
	if err != nil {
		return err
	}
	stmt, err := attest.NewStatement(subjects, attest.PredicateRunV1, pred)
	if err != nil {
		return fmt.Errorf("build statement: %w", err)
	}
	_, err = writeOnce(filepath.Join(RunDir(r.Home, st.ID), statementFile), stmt)
	return err
}

// storeSubjects stores the submission (if any) and a deterministic tar of the agent and
// evaluator logs in HOME/objects and returns them as the statement's subjects.
func (r *Runner) storeSubjects(st *RunState, b *tasks.Bundle, ev *evalResult) ([]attest.Subject, error) {
	logs, err := tarLogs(filepath.Join(RunDir(r.Home, st.ID), "logs"))
	if err != nil {
		return nil, err
	}
	var subjects []attest.Subject
	if ev.submission != nil {
		c, err := storeObject(r.Home, ev.submission)
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, subject(b.Meta.Submission.File, ev.submission, c, attest.RoleSubmission))
	}
	if ev.verdicts != nil {
		c, err := storeObject(r.Home, ev.verdicts)
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, subject(VerdictsFile, ev.verdicts, c, attest.RoleVerdicts))
	}
	if ts, ok, err := r.transcriptSubject(st); err != nil {
		return nil, err
	} else if ok {
		subjects = append(subjects, ts)
	}
	lc, err := storeObject(r.Home, logs)
	if err != nil {
		return nil, err
	}
	return append(subjects, subject("logs.tar", logs, lc, attest.RoleLogs)), nil
}

// runPredicate is what the run attests: slot and attempt, signer, hardware, times, how the
// agent ended, the evaluation, telemetry, the executor's containment and this build.
func (r *Runner) runPredicate(ex Executor, st *RunState, b *tasks.Bundle, ev *evalResult) (attest.RunPredicate, error) {
	inv, _ := r.inventory()
	node, err := peer.IDFromPrivateKey(r.Key)
	if err != nil {
		return attest.RunPredicate{}, err
	}
	hashes := make([]string, 0, len(st.GPUs))
	for _, g := range st.GPUs {
		hashes = append(hashes, gpu.HashUUID(g))
	}
	end := r.now()
	agentEnd := end
	if st.AgentExit != nil && !st.AgentExit.Finished.IsZero() {
		agentEnd = st.AgentExit.Finished
	}
	wall := max(agentEnd.Sub(st.Start), 0)
	exit := attest.ExitStatus{Reason: exitReason(st.AgentExit)}
	if e := st.AgentExit; e != nil {
		exit.Code, exit.Signal, exit.OOMKilled, exit.TimedOut = e.ExitCode, e.Signal, e.OOMKilled, e.TimedOut
	}
	build := Build()
	pred := attest.RunPredicate{
		Slot:          attest.Slot{Campaign: st.Campaign, Task: st.TaskCID, Agent: st.AgentCID, Seed: st.Seed},
		Node:          node.String(),
		Lab:           r.Lab,
		Hardware:      attest.Hardware{GPUModel: inv.Model(st.GPUs), Driver: inv.Driver, GPUCount: len(st.GPUs), GPUUUIDHashes: hashes},
		Start:         st.Start,
		End:           end,
		WallSeconds:   wall.Seconds(),
		GPUSeconds:    gpu.GPUSeconds(wall, len(st.GPUs)),
		EnergyJoules:  st.Telemetry.EnergyJoules,
		Exit:          exit,
		Valid:         ev.valid,
		InvalidReason: ev.reason,
		Score:         ev.score,
		ScoreAbsent:   ev.scoreAbsent,
		Metric:        b.Meta.Metric.Name,
		Evaluator:     ev.evaluator,
		Telemetry:     telemetryView(st),
		Attempt:       st.Attempt,
		Witness:       st.Witness,
		Executor:      executorInfo(ex, st.AgentHandle),
		Build:         &build,
		Model:         modelRun(st, wall),
		Heureka:       ev.heureka,
	}
	// A scheduler counts the GPUs it granted from the job's start, not from when the run was
	// queued; its accounting replaces the runner's estimate where it has one.
	if st.AgentGPUSeconds > 0 {
		pred.GPUSeconds = st.AgentGPUSeconds
	}
	if st.AgentEnergyJoules > 0 {
		pred.EnergyJoules = st.AgentEnergyJoules
	}
	if pred.Hardware.GPUModel == "" {
		pred.Hardware.GPUModel = "cpu"
	}
	return pred, nil
}

// telemetryView is the attested telemetry (without the raw energy counters).
func telemetryView(st *RunState) map[string]any {
	t := st.Telemetry
	v := map[string]any{
		"gpu_samples":           t.Samples,
		"gpu_util_mean_percent": t.UtilMeanPercent,
		"gpu_util_max_percent":  t.UtilMaxPercent,
		"gpu_peak_memory_bytes": t.PeakMemoryBytes,
	}
	if st.AgentPeakMemory > 0 {
		v["agent_peak_memory_bytes"] = st.AgentPeakMemory
	}
	if st.AgentCPUSeconds > 0 {
		v["agent_cpu_seconds"] = st.AgentCPUSeconds
	}
	if st.AgentPIDsLimitHits > 0 {
		v["agent_pids_limit_hits"] = st.AgentPIDsLimitHits
	}
	return v
}

func subject(name string, data []byte, c, role string) attest.Subject {
	sum := sha256.Sum256(data)
	return attest.Subject{
		Name:        name,
		Digest:      map[string]string{"sha256": hex.EncodeToString(sum[:])},
		Annotations: map[string]any{attest.AnnotationCID: c, attest.AnnotationRole: role},
	}
}

// storeObject writes data to HOME/objects/<cid> (once) and returns the CID.
func storeObject(h home.Home, data []byte) (string, error) {
	c := agentspec.RawCID(data)
	if err := os.MkdirAll(ObjectsDir(h), 0o755); err != nil {
		return "", err
	}
	_, err := writeOnce(filepath.Join(ObjectsDir(h), c), data)
	return c, err
}

// MaxLogBytes bounds how much of each log goes into a run's log archive: the first and last
// halves are kept, with a line saying how much was left out between them. An agent that
// prints gigabytes thus cannot exhaust the runner's memory or the home's object store.
var MaxLogBytes int64 = 64 << 20

// tarLogs archives the *.log files of dir in name order with zeroed times and owners, so
// the same logs always give the same archive and CID. Each file is read up to MaxLogBytes
// (head and tail), never whole.
func tarLogs(dir string) ([]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := readCapped(filepath.Join(dir, e.Name()), MaxLogBytes)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: e.Name(), Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readCapped returns the file whole if it holds at most max bytes, else its first and last
// max/2 bytes around a line that says how many bytes were left out.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size <= max {
		return io.ReadAll(io.LimitReader(f, max))
	}
	half := max / 2
	out := make([]byte, 0, max+128)
	head := make([]byte, half)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, err
	}
	out = append(out, head...)
	out = append(out, fmt.Sprintf("\n[evalmesh: %d bytes of this log left out]\n", size-2*half)...)
	tail := make([]byte, half)
	if _, err := f.ReadAt(tail, size-half); err != nil && err != io.EOF {
		return nil, err
	}
	return append(out, tail...), nil
}

// sign signs statement.json once. If attestation.json exists it is returned as is: a run is
// never signed twice. Ed25519 signing is deterministic, so a crash between signing and
// writing re-creates the very same envelope and ID.
func (r *Runner) sign(st *RunState) (*Outcome, error) {
	dir := RunDir(r.Home, st.ID)
	envPath := filepath.Join(dir, attestationFile)
	env, err := os.ReadFile(envPath)
	if err != nil {
		stmt, rerr := os.ReadFile(filepath.Join(dir, statementFile))
		if rerr != nil {
			return nil, r.fail(st, fmt.Errorf("no statement to sign: %w", rerr))
		}
		signed, _, serr := attest.Sign(r.Key, r.CurrentCert(), stmt)
		if serr != nil {
			return nil, r.fail(st, fmt.Errorf("sign: %w", serr))
		}
		if env, err = writeOnce(envPath, signed); err != nil {
			return nil, err
		}
	}
	id := attest.EnvelopeID(env)
	if err := os.MkdirAll(r.Home.AttestationsDir(), 0o755); err != nil {
		return nil, err
	}
	if _, err := writeOnce(filepath.Join(r.Home.AttestationsDir(), id+".json"), env); err != nil {
		return nil, err
	}
	st.AttestationID, st.Phase = id, PhaseDone
	if err := saveState(r.Home, st, r.now()); err != nil {
		return nil, err
	}
	r.progress(st, -1)
	return outcomeOf(st.ID, id, env)
}

func outcomeOf(runID, id string, env []byte) (*Outcome, error) {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return nil, err
	}
	stmt, err := attest.ParseStatement(e.Payload)
	if err != nil {
		return nil, err
	}
	var p attest.RunPredicate
	if err := jsonUnmarshal(stmt.Predicate, &p); err != nil {
		return nil, err
	}
	return &Outcome{RunID: runID, AttestationID: id, Valid: p.Valid, Score: p.Score, Metric: p.Metric,
		InvalidReason: p.InvalidReason, Predicate: p, Envelope: env}, nil
}
