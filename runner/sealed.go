package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"filippo.io/age"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/tasks"
)

// Sealed bundles (docs/bundle-format.md §7) in a run: the agent runs on public/ as for any
// bundle; only the evaluation step opens private.age, with the data key this lab was
// granted. The built-in metric reads the labels from the decrypted stream into memory (no
// clear byte reaches a disk); an evaluator program gets them in eval/sealed under the run
// folder — which no agent task ever mounts, and which exists only after the agent's task
// is destroyed — and the folder is removed when the evaluator ends. Nothing decrypted is
// ever added to the blockstore or HOME/objects.

// KeySource finds the data key of a sealed bundle this lab was granted.
type KeySource interface {
	// DataKey returns the key of the bundle with this CID, or a *NoKeyError.
	DataKey(bundleCID string) (*tasks.DataKey, error)
}

// MaxLabelsBytes bounds the labels file a sealed bundle's built-in metric reads into memory.
const MaxLabelsBytes = 1 << 30

// NoKeyError means the bundle is sealed and this lab holds no grant of its key: the run can
// go ahead but not be scored here.
type NoKeyError struct {
	Bundle string
	Lab    string
	Detail string // why, when more is known (no age identity on this node, …)
}

func (e *NoKeyError) Error() string {
	lab := e.Lab
	if lab == "" {
		lab = "this lab"
	}
	s := fmt.Sprintf("bundle %s is sealed and %s holds no grant of its key", e.Bundle, lab)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s + "; the submission is kept and the run is scored here once a lab that holds the key grants it (`evalmesh task grant " +
		e.Bundle + " --lab NAME` on one of its nodes), or it is scored by a lab that holds the key"
}

// GrantKeys is a node's KeySource: the grants it knows (Grants), verified under Trust when
// set, whose grantee is Lab, opened with the lab's age identity.
type GrantKeys struct {
	Lab      string
	Identity *age.X25519Identity
	Trust    *attest.TrustStore
	// Grants returns the envelopes that may be grants of the bundle (others are skipped).
	Grants func(bundleCID string) [][]byte
}

// DataKey implements KeySource.
func (g *GrantKeys) DataKey(bundle string) (*tasks.DataKey, error) {
	if g == nil || g.Identity == nil {
		return nil, &NoKeyError{Bundle: bundle, Detail: "this node holds no lab age identity: copy the lab's lab-age.key to HOME/lab-age.key"}
	}
	var envs [][]byte
	if g.Grants != nil {
		envs = g.Grants(bundle)
	}
	seen := 0
	for _, env := range envs {
		var gp *attest.GrantPredicate
		if g.Trust != nil {
			v, err := attest.VerifyWith(env, g.Trust, attest.VerifyOptions{AtClaimedTime: true})
			if err != nil || v.Grant == nil {
				continue
			}
			gp = v.Grant
		} else {
			p, ok, _ := attest.GrantOf(env)
			if !ok {
				continue
			}
			gp = p
		}
		if gp.Bundle != bundle || gp.Lab != g.Lab {
			continue
		}
		seen++
		s, err := attest.OpenGrant(gp, g.Identity)
		if err != nil {
			continue
		}
		if k, err := tasks.ParseDataKey(s); err == nil {
			return k, nil
		}
	}
	e := &NoKeyError{Bundle: bundle, Lab: g.Lab}
	if seen > 0 {
		e.Detail = fmt.Sprintf("%d grant(s) to this lab do not open with its age identity %s", seen, g.Identity.Recipient())
	}
	return nil, e
}

// DirGrants returns a Grants function reading the envelope files of a folder (e.g.
// HOME/attestations, where `evalmesh task grant` writes the grants it makes).
func DirGrants(dir string) func(string) [][]byte {
	return func(bundle string) [][]byte {
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
		files, _, err := attest.ReadEnvelopeDir(dir)
		if err != nil {
			return nil
		}
		var out [][]byte
		for _, f := range files {
			if g, ok, _ := attest.GrantOf(f.Data); ok && g.Bundle == bundle {
				out = append(out, f.Data)
			}
		}
		return out
	}
}

// HoldsKey reports whether this node can open the key of the sealed bundle with this CID
// now (a grant to its lab that opens with its age identity): whether a run of it would be
// scored here rather than wait for a grant.
func (r *Runner) HoldsKey(bundle string) bool {
	_, err := r.dataKey(bundle)
	return err == nil
}

// dataKey is the sealed bundle's key from r.Keys.
func (r *Runner) dataKey(bundle string) (*tasks.DataKey, error) {
	if r.Keys == nil {
		return nil, &NoKeyError{Bundle: bundle, Lab: r.Lab, Detail: "this node reads no grants"}
	}
	return r.Keys.DataKey(bundle)
}

// sealedLabels decrypts the built-in metric's labels of the sealed bundle b into memory.
func (r *Runner) sealedLabels(b *tasks.Bundle, bundle string) ([]byte, error) {
	key, err := r.dataKey(bundle)
	if err != nil {
		return nil, err
	}
	if b.Meta.Evaluator.Labels == "" {
		return nil, fmt.Errorf("task %s: no evaluator.labels for the built-in metric", b.Meta.Name)
	}
	labels, err := tasks.ReadSealedFile(b.Dir, key, b.Meta.Evaluator.Labels, MaxLabelsBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", b.Meta.Name, err)
	}
	return labels, nil
}

// evaluateSealed is evaluate for a sealed bundle.
func (r *Runner) evaluateSealed(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle, builtin bool, metric, evaluator string, sub []byte) (*evalResult, error) {
	if builtin {
		labels, err := r.sealedLabels(b, st.TaskCID)
		if err != nil {
			return nil, err
		}
		return scoreLabels(b.Meta, metric, evaluator, sub, labels)
	}
	ub, clean, err := r.unsealForEvaluator(b, st.TaskCID, RunDir(r.Home, st.ID))
	if err != nil {
		return nil, err
	}
	defer clean()
	return r.evaluateInTask(ctx, ex, st, ub, evaluator, sub)
}

// unsealForEvaluator decrypts the sealed bundle b (CID bundle) into dir/eval/sealed for an
// evaluator program — a run's or a re-score's — and returns the clear bundle and the func
// that removes it and the evaluator's copy of private/. Whatever the outcome, the caller
// calls clean, so no clear copy outlives the evaluator (a crash's is removed beforehand).
func (r *Runner) unsealForEvaluator(b *tasks.Bundle, bundle, dir string) (*tasks.Bundle, func(), error) {
	key, err := r.dataKey(bundle)
	if err != nil {
		return nil, nil, err
	}
	eval := filepath.Join(dir, "eval")
	dest := filepath.Join(eval, "sealed")
	clean := func() {
		_ = os.RemoveAll(dest)
		_ = os.RemoveAll(filepath.Join(eval, "private"))
	}
	clean()
	if err := os.MkdirAll(eval, 0o755); err != nil {
		return nil, nil, err
	}
	ub, err := tasks.Unseal(b, key, dest)
	if err != nil {
		clean()
		return nil, nil, fmt.Errorf("task %s: %w", b.Meta.Name, err)
	}
	return ub, clean, nil
}

// awaitKey parks a run whose sealed bundle this lab cannot open: the submission stays in
// output/, the GPUs are free, and ScoreAwaiting (or Recover) scores it once a grant exists.
func (r *Runner) awaitKey(st *RunState, nk *NoKeyError) error {
	st.Phase, st.Error = PhaseAwaitingKey, nk.Error()
	if err := saveState(r.Home, st, r.now()); err != nil {
		return errors.Join(nk, err)
	}
	r.progress(st, -1)
	return nk
}

// ScoreAwaiting scores the runs waiting for the key of bundle (every waiting run when
// bundle is ""), e.g. when a grant arrives. A run whose key is still missing stays waiting
// (its Err is a *NoKeyError).
func (r *Runner) ScoreAwaiting(ctx context.Context, bundle string) ([]Recovered, error) {
	runs, err := ListRuns(r.Home)
	if err != nil {
		return nil, err
	}
	var out []Recovered
	for _, st := range runs {
		if st.Phase != PhaseAwaitingKey || (bundle != "" && st.TaskCID != bundle) {
			continue
		}
		o, err := r.recoverRun(ctx, st)
		if errors.Is(err, errOwned) {
			continue
		}
		out = append(out, Recovered{RunID: st.ID, Outcome: o, Err: err})
	}
	return out, nil
}
