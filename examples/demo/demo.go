// Package demo is `evalmesh demo`: the whole pipeline on embedded defaults, with no
// downloads, Docker or GPUs. It creates a lab ("demo-lab") that certifies the demo node,
// writes a trust file listing only that lab, generates the example tasks, runs every
// baseline agent on every task for a few seeds with the process executor (each run signed
// by the node under its lab certificate), and computes the leaderboard exactly as
// `evalmesh ledger` does: from the attestation files the runs left, verified under the
// trust file, named through the task bundles and agent specs the demo wrote beside them.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.yaml.in/yaml/v3"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/taskset"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// LabName is the name the demo's lab is created and trusted under.
const LabName = "demo-lab"

// Files the demo leaves in its home beside the node's own (paths relative to the home); the
// trust file listing only the demo lab is the home's own (home.TrustFile).
const (
	LabDir    = "demo-lab"        // the lab's key (lab.key) and public half (lab.json)
	TasksDir  = "examples/tasks"  // the example task bundles
	AgentsDir = "examples/agents" // one agent spec per example agent (NAME.yaml)
)

// Scoring is the scoring configuration of the demo's ledger: the defaults of `evalmesh
// ledger`, so the printed command recomputes the same root.
var Scoring = scoring.Options{Worst: "population", BootstrapRounds: 100}

// Options tune the demo. The zero value runs every baseline on every example task with
// three seeds in a fresh temporary home.
type Options struct {
	// Home is the node home; "" means a new temporary folder (kept, and printed).
	Home string
	// Seeds per (task, agent); 0 means 3.
	Seeds int
	// Agents and Tasks restrict the grid; empty means all baselines / all example tasks.
	Agents []string
	Tasks  []string
	// SelfExe is the evalmesh binary the agents run as (`evalmesh agent NAME`); "" means
	// os.Executable().
	SelfExe string
	// Log receives one line per run; nil discards.
	Log io.Writer
	// Now is the clock certificates are issued and attestations verified by; nil: time.Now.
	Now func() time.Time
}

// Run is one cell of the grid.
type Run struct {
	Task          string   `json:"task"`
	Agent         string   `json:"agent"`
	Seed          int      `json:"seed"`
	RunID         string   `json:"run_id"`
	AttestationID string   `json:"attestation_id"`
	Valid         bool     `json:"valid"`
	Score         *float64 `json:"score"`
	InvalidReason string   `json:"invalid_reason,omitempty"`
	Seconds       float64  `json:"seconds"`
}

// Result is what the demo did.
type Result struct {
	Home string `json:"home"`
	Runs []Run  `json:"runs"`
	// Verified is how many attestation files in the home verified under the trust file
	// (this demo's runs and those of earlier demos in the same home).
	Verified int             `json:"verified"`
	Ledger   *scoring.Ledger `json:"ledger"`
	Seconds  float64         `json:"seconds"`

	// Node is the demo node's peer ID; Lab the ID of the lab that certified it, whose
	// certificate (CertID) every run attestation carries.
	Node    string `json:"peer_id"`
	Lab     string `json:"lab"`
	LabName string `json:"lab_name"`
	CertID  string `json:"cert_id"`
	// Paths of the files the ledger is a function of.
	TrustFile    string `json:"trust_file"`
	TasksDir     string `json:"tasks_dir"`
	AgentsDir    string `json:"agents_dir"`
	Attestations string `json:"attestations_dir"`
	// Report says what became of every attestation file (as `evalmesh ledger --json`'s
	// "attestations"); LedgerRoot is the ledger's root.
	Report     *attest.LedgerReport `json:"attestations"`
	LedgerRoot string               `json:"ledger_root"`
	// LedgerCommand is the `evalmesh ledger` argv that recomputes LedgerRoot from the
	// files the demo left.
	LedgerCommand []string `json:"ledger_command"`
}

// Execute runs the demo.
func Execute(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	// The co-scientists answer only the HeurekaBench task; the baselines only the others.
	baselines, coScientists, err := splitAgents(opts.Agents)
	if err != nil {
		return nil, err
	}
	opts.Agents = baselines
	heureka := wantsHeureka(opts.Tasks, len(opts.Tasks) == 0)
	if len(opts.Tasks) == 0 {
		opts.Tasks = exampletasks.Names
	}
	opts.Tasks = slices.DeleteFunc(slices.Clone(opts.Tasks), func(n string) bool { return n == heurekaexample.Name })
	dir := opts.Home
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "evalmesh-demo-"); err != nil {
			return nil, err
		}
	}
	h, err := home.Resolve(dir)
	if err != nil {
		return nil, err
	}
	if _, err := h.Init(); errors.Is(err, home.ErrExists) {
		// A node home the demo did not make would get a demo lab's certificate and demo runs
		// in its attestations: only a home an earlier demo made is reused.
		if _, serr := os.Stat(filepath.Join(h.Dir, LabDir)); serr != nil {
			return nil, fmt.Errorf("%s is a node home the demo did not create; the demo adds a lab, a node certificate and its runs to its home: omit --home, or pass a new folder", h.Dir)
		}
	} else if err != nil {
		return nil, err
	}
	key, err := h.Identity()
	if err != nil {
		return nil, err
	}
	pid, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	res := &Result{Home: h.Dir, Node: pid.String(), LabName: LabName,
		TrustFile: h.TrustPath(), TasksDir: filepath.Join(h.Dir, filepath.FromSlash(TasksDir)),
		AgentsDir: filepath.Join(h.Dir, filepath.FromSlash(AgentsDir)), Attestations: h.AttestationsDir()}

	// The trust chain: a lab, its certificate for this node in HOME/node-cert.json, and a
	// trust file that lists the lab alone, so every run must chain to it to count.
	lab, err := openLab(filepath.Join(h.Dir, LabDir))
	if err != nil {
		return nil, err
	}
	cert, err := certifyNode(h, lab, res.Node, now())
	if err != nil {
		return nil, err
	}
	res.Lab, res.CertID = lab.ID, cert.ID
	trust := attest.NewTrustStore()
	if _, err := trust.AddLab(LabName, lab.Pub); err != nil {
		return nil, err
	}
	if err := trust.Save(res.TrustFile); err != nil {
		return nil, err
	}

	// The ledger's other inputs: every task bundle (by CID) and agent spec (by CID).
	if _, err := exampletasks.Generate(res.TasksDir); err != nil {
		return nil, err
	}
	if heureka {
		if _, err := heurekaexample.Generate(res.TasksDir); err != nil {
			return nil, err
		}
	}
	infos, bundles, err := taskInputs(ctx, res.TasksDir)
	if err != nil {
		return nil, err
	}
	specs, err := writeAgentSpecs(res.AgentsDir)
	if err != nil {
		return nil, err
	}
	agentNames := make(map[string]string, len(specs))
	for name, s := range specs {
		agentNames[s.CID()] = name
	}

	// The runner as `evalmesh run` builds it for this home: it signs with the node key and
	// embeds HOME/node-cert.json in every attestation.
	r, err := runner.ForHome(h, map[string]runner.Executor{"process": process.New(process.Options{})}, "process", log)
	if err != nil {
		return nil, err
	}
	if r.Cert == nil || r.Cert.ID != cert.ID {
		return nil, fmt.Errorf("the runner did not pick up the demo's certificate %s from %s", cert.ID, h.CertPath())
	}
	r.SelfExe = opts.SelfExe
	if rec, err := r.Recover(ctx); err != nil {
		return nil, err
	} else if len(rec) > 0 {
		fmt.Fprintf(log, "recovered %d unfinished run(s) of an earlier demo\n", len(rec))
	}

	for _, name := range opts.Tasks {
		tdir := filepath.Join(res.TasksDir, name)
		b, err := tasks.Open(tdir)
		if err != nil {
			return nil, err
		}
		m := b.Meta
		cid, err := runner.BundleCID(ctx, tdir)
		if err != nil {
			return nil, err
		}
		if bundles[cid] != m.Name {
			return nil, fmt.Errorf("task bundle %s has CID %s, which the ledger's task map does not name %s", tdir, cid, m.Name)
		}
		for _, agent := range opts.Agents {
			spec := specs[agent]
			for seed := 0; seed < opts.Seeds; seed++ {
				t0 := time.Now()
				o, err := r.Run(ctx, runner.Request{TaskDir: tdir, TaskCID: cid, Agent: spec, Seed: seed})
				if err != nil {
					return nil, fmt.Errorf("%s × %s seed %d: %w", m.Name, agent, seed, err)
				}
				run := Run{Task: m.Name, Agent: agent, Seed: seed, RunID: o.RunID, AttestationID: o.AttestationID,
					Valid: o.Valid, Score: o.Score, InvalidReason: o.InvalidReason, Seconds: time.Since(t0).Seconds()}
				res.Runs = append(res.Runs, run)
				score := "invalid: " + o.InvalidReason
				if o.Valid {
					score = fmt.Sprintf("%s %.4g", o.Metric, *o.Score)
				}
				fmt.Fprintf(log, "%-32s %-10s seed %d  %s  %s\n", m.Name, agent, seed, short(o.AttestationID), score)
			}
		}
	}

	if heureka && len(coScientists) > 0 {
		if err := runHeureka(ctx, r, res, bundles, specs, coScientists, opts.Seeds, log); err != nil {
			return nil, err
		}
	}

	// The leaderboard as any peer holding these files computes it: read the attestation
	// folder, verify under the trust file as written, accept, score.
	loaded, err := attest.LoadTrust(res.TrustFile)
	if err != nil {
		return nil, err
	}
	// The demo runs its agents under the process executor (no container images to pull),
	// which the default acceptance policy does not count: it opts in, and says so.
	fmt.Fprintln(log, "this network counts process-executor runs (--allow-process-runs): the demo's agents are not isolated from the task's private files")
	l, rep, err := attest.LedgerFromDir(res.Attestations, attest.LedgerInput{
		Trust: loaded, Now: now(), Tasks: infos,
		Policy:  attest.AcceptPolicy{Tasks: bundles, Agents: agentNames, AllowProcessRuns: true},
		Scoring: Scoring,
	})
	if err != nil {
		return nil, err
	}
	res.Ledger, res.Report, res.LedgerRoot = l, rep, l.Root()
	res.Verified = rep.Read - len(rep.Refused)
	res.LedgerCommand = []string{"evalmesh", "ledger", "--home", h.Dir, "--trust", res.TrustFile,
		"--tasks", res.TasksDir, "--agents", res.AgentsDir, "--allow-process-runs"}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// openLab loads the demo lab of an earlier demo in this home, or creates it.
func openLab(dir string) (*attest.Lab, error) {
	if _, err := os.Stat(filepath.Join(dir, attest.LabKeyFile)); err == nil {
		return attest.LoadLab(dir)
	}
	return attest.InitLab(dir, LabName)
}

// certifyNode makes sure HOME/node-cert.json certifies node for lab from now on, for
// attest.DefaultCertValidity (so the printed `evalmesh ledger` command still verifies the
// runs later): it keeps a certificate of an earlier demo that is still good for a day, and
// refuses to replace a certificate of another lab (that home is not the demo's).
func certifyNode(h home.Home, lab *attest.Lab, node string, now time.Time) (*attest.NodeCert, error) {
	old, err := attest.LoadNodeCert(h.CertPath())
	switch {
	case err == nil:
		if old.Lab != lab.ID {
			return nil, fmt.Errorf("%s certifies this node for lab %s, not the demo's lab %s: run the demo in a fresh home (omit --home)", h.CertPath(), old.Lab, lab.ID)
		}
		if old.Node == node && !now.Before(old.NotBefore) && now.Add(24*time.Hour).Before(old.NotAfter) {
			return old, nil
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("%w: remove it, or run the demo in a fresh home (omit --home)", err)
	}
	// A minute of slack: the certificate is truncated to the second and peers' clocks drift.
	cert, err := lab.Certify(node, now.Add(-time.Minute), attest.DefaultCertValidity)
	if err != nil {
		return nil, err
	}
	if err := home.WriteFileAtomic(h.CertPath(), cert.Raw(), 0o644); err != nil {
		return nil, err
	}
	return cert, nil
}

// taskInputs reads every task folder under dir as `evalmesh ledger --tasks dir` does: the
// task metadata sorted by name, and each bundle's CID → name.
func taskInputs(ctx context.Context, dir string) ([]scoring.TaskInfo, map[string]string, error) {
	folders, err := taskset.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	bundles, err := taskset.BundleCIDs(ctx, folders)
	if err != nil {
		return nil, nil, err
	}
	infos := make([]scoring.TaskInfo, len(folders))
	for i, f := range folders {
		infos[i] = f.Info
	}
	return infos, bundles, nil
}

// writeAgentSpecs writes DIR/NAME.yaml for every example agent and returns the specs as
// read back from those files, so the runs name exactly the agents `--agents DIR` names.
func writeAgentSpecs(dir string) (map[string]*agentspec.Spec, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := map[string]*agentspec.Spec{}
	for _, name := range agents.Names() {
		a, _ := agents.Lookup(name)
		spec := &agentspec.Spec{Name: name, Version: "1.0.0", Command: []string{"evalmesh", "agent", name}}
		b, err := yaml.Marshal(spec)
		if err != nil {
			return nil, err
		}
		b = append([]byte("# Example agent "+name+": "+strings.TrimSpace(a.Description)+"\n"), b...)
		path := filepath.Join(dir, name+".yaml")
		if err := home.WriteFileAtomic(path, b, 0o644); err != nil {
			return nil, err
		}
		if out[name], err = agentspec.Load(path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}
