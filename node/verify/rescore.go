package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// rescore re-scores one counted run with the daemons' code and records the outcome in rep.
func rescore(ctx context.Context, n Node, o Options, id string, env []byte, bundles map[string]string, names protocol.LedgerNames, rep *Report) {
	notRescored := func(lab, task, why string) {
		rep.NotRescored = append(rep.NotRescored, NotRescored{Attestation: id, Lab: lab, Task: task, Reason: why})
	}
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		notRescored("", "", "envelope: "+err.Error())
		return
	}
	st, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		notRescored("", "", "not a run attestation")
		return
	}
	task := names.TaskNames[run.Slot.Task]
	if task == "" {
		task = run.Slot.Task
	}
	dir, ok := bundles[run.Slot.Task]
	if !ok {
		notRescored(run.Lab, task, "bundle "+run.Slot.Task+" not fetched")
		return
	}
	if run.ScoreAbsent {
		// Nothing of the runner's to confirm: its result is its scoring labs' verdict.
		notRescored(run.Lab, task, "unscored run (ledger.scorers): its result is the verdict of its task's scoring labs, not a score of its runner's")
		return
	}
	if tasks.IsSealed(dir) && !o.Runner.HoldsKey(run.Slot.Task) {
		notRescored(run.Lab, task, "sealed task: this node holds no key grant for bundle "+run.Slot.Task+" (only the network's labs can score it)")
		return
	}
	out, err := rescoreRun(ctx, n, o, id, st, run, env, dir)
	if err != nil {
		notRescored(run.Lab, task, err.Error())
		return
	}
	recordRescore(rep, id, run, task, names, out)
}

// rescoreRun re-scores run against the bundle in dir: its submission fetched by CID, or, when
// the statement names none, as a run that submitted nothing.
func rescoreRun(ctx context.Context, n Node, o Options, id string, st *attest.Statement, run *attest.RunPredicate, env []byte, dir string) (*runner.Rescored, error) {
	var subName, subCID, subSum string
	for _, s := range st.Subject {
		if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
			subName, subSum = s.Name, s.Digest["sha256"]
			subCID, _ = s.Annotations[attest.AnnotationCID].(string)
		}
	}
	if subCID == "" {
		return o.Runner.RescoreMissing(id, run, env, dir)
	}
	sub, err := fetchSubmission(ctx, n, subCID, subSum, o.Clock, o.FetchTimeout)
	if err != nil {
		return nil, err
	}
	return o.Runner.RescoreSubmission(ctx, id, run, sub, subName, subCID, dir)
}

// recordRescore counts a re-scored run in rep: confirmed, or a disagreement.
func recordRescore(rep *Report, id string, run *attest.RunPredicate, task string, names protocol.LedgerNames, out *runner.Rescored) {
	rep.Rescored++
	if attest.Confirms(run, &out.Predicate, attest.Agree) {
		rep.Confirmed++
		return
	}
	agent := names.AgentNames[run.Slot.Agent]
	if agent == "" {
		agent = run.Slot.Agent
	}
	rep.Disagreements = append(rep.Disagreements, RescoreDisagreement{Attestation: id, Lab: run.Lab, Task: task, Agent: agent, Seed: run.Slot.Seed,
		Metric: run.Metric, Attested: run.Score, AttestValid: run.Valid, Rescored: out.Predicate.Score, RescoreOK: out.Predicate.Valid})
}

// fetchSubmission gets a raw block by CID from the connected peers and checks it against
// the attested sha256; the fetch's budget, timeout, runs on clk.
func fetchSubmission(ctx context.Context, n Node, cs, sum string, clk clock.Clock, timeout time.Duration) ([]byte, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return nil, fmt.Errorf("submission CID %q: %w", cs, err)
	}
	ctx, cancel := clock.WithTimeout(ctx, clk, timeout)
	defer cancel()
	b, err := n.GetBlock(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("fetch submission %s: no peer served it: %w", cs, err)
	}
	got := sha256.Sum256(b)
	if sum != "" && hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("submission %s does not match its attested sha256", cs)
	}
	return b, nil
}
