// Package runner owns the execution of one run: GPU inventory through NVML (runner/gpu),
// the executors (runner/docker for production, runner/process for development), resource and
// wall-clock limits, log capture, evaluation in isolation from the agent, telemetry, and the
// signed run attestation.
//
// It never decides what to run; the caller hands it a bundle, an agent spec and a seed
// (Runner.Run), and after a restart calls Runner.Recover.
//
// A run moves through phases, each recorded atomically in HOME/runs/<run-id>/state.json
// before the next step starts, so a node killed at any point knows what it was doing:
//
//	starting    GPUs allocated (under a lock on HOME/runs, from the runs not yet final)
//	agent       agent task started, its Handle saved; Recover re-attaches or fails the run
//	evaluating  agent ended and its task destroyed; the submission is scored by the built-in
//	            metric or an evaluator task that alone sees private/
//	signing     statement.json written once (never rebuilt); signed into attestation.json
//	done        attestation.json exists, copied to HOME/attestations/<id>.json
//	failed      ended without an attestation (not the agent's fault: lost task, bad bundle)
//
// A run is signed at most once: statement.json and attestation.json are created with
// link(2) and never replaced, and ed25519 signing is deterministic, so re-signing the saved
// statement after a crash yields the very same envelope and ID.
//
// Before a run starts (before GPUs are held) the signing chain is checked (CheckSigning):
// a run whose attestation no trust store would accept is refused, not run. A slot this node
// ran before is a new attempt (RunState.Attempt, the predicate's attempt).
//
// Run folder: state.json, statement.json, attestation.json, workspace/ and output/ (the
// agent's), logs/agent.log and logs/evaluator.log, eval/ (the evaluator's copy of the
// submission). The submission and a deterministic tar of the logs are also stored by CID in
// HOME/objects/<cid> and named as the attestation's subjects.
package runner
