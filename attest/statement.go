package attest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/evalmesh/evalmesh/internal/ecvrf"
	"github.com/evalmesh/evalmesh/internal/jsonkeys"
)

// Media and predicate types. The predicate URIs carry their version: a change to a predicate's
// fields is a new URI, never a silent reinterpretation of signed bytes.
const (
	// PayloadType is the DSSE payloadType of every attestation (in-toto Statement v1).
	PayloadType = "application/vnd.in-toto+json"
	// StatementTypeV1 is the in-toto Statement v1 `_type`.
	StatementTypeV1 = "https://in-toto.io/Statement/v1"
	// PredicateRunV1 marks a run attestation (RunPredicate).
	PredicateRunV1 = "https://evalmesh.dev/attestation/run/v1"
	// PredicateRescoreV1 marks a re-score attestation (RescorePredicate).
	PredicateRescoreV1 = "https://evalmesh.dev/attestation/rescore/v1"
)

// Subject annotation keys and roles.
const (
	// AnnotationCID holds the subject's IPFS CID (string).
	AnnotationCID = "cid"
	// AnnotationRole says what the subject is to a run: RoleSubmission or RoleLogs.
	AnnotationRole = "role"
	// RoleSubmission marks the submission file; equivocation compares its sha256.
	RoleSubmission = "submission"
	// RoleLogs marks the run's log archive.
	RoleLogs = "logs"
)

// Subject is an in-toto ResourceDescriptor naming an artifact the statement is about.
type Subject struct {
	Name   string            `json:"name,omitempty"`
	Digest map[string]string `json:"digest"`
	// Annotations carries "cid" (the artifact's CID) and "role" (RoleSubmission, RoleLogs).
	Annotations map[string]any `json:"annotations,omitempty"`
}

// Statement is an in-toto Statement v1. Predicate is kept as raw bytes: it is decoded by
// predicate type, and never re-serialised for verification.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate,omitempty"`
}

// Slot is one cell of a campaign (docs/design.md §1): campaign, task bundle and agent CIDs, seed index.
type Slot struct {
	Campaign string `json:"campaign"`
	Task     string `json:"task"`
	Agent    string `json:"agent"`
	Seed     int    `json:"seed"`
}

// String gives a stable key for the slot.
func (s Slot) String() string {
	return fmt.Sprintf("%s/%s/%s/%d", s.Campaign, s.Task, s.Agent, s.Seed)
}

// Hardware describes what a run ran on. GPU UUIDs are hashed so labs do not publish
// inventory identifiers.
type Hardware struct {
	GPUModel      string   `json:"gpu_model"`
	Driver        string   `json:"driver"`
	GPUCount      int      `json:"gpu_count"`
	GPUUUIDHashes []string `json:"gpu_uuid_hashes,omitempty"`
}

// ExitStatus is how the agent container ended.
type ExitStatus struct {
	Code      int    `json:"code"`
	Signal    int    `json:"signal,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// RunPredicate is the predicate of a run attestation (docs/design.md §5).
type RunPredicate struct {
	Slot          Slot       `json:"slot"`
	Node          string     `json:"node"` // peer ID of the signing node
	Lab           string     `json:"lab"`  // lab ID of the node's certificate; "" for a directly trusted node
	Hardware      Hardware   `json:"hardware"`
	Start         time.Time  `json:"start"`
	End           time.Time  `json:"end"`
	WallSeconds   float64    `json:"wall_seconds"`
	GPUSeconds    float64    `json:"gpu_seconds"`
	EnergyJoules  float64    `json:"energy_joules"`
	Exit          ExitStatus `json:"exit"`
	Valid         bool       `json:"valid"`
	InvalidReason string     `json:"invalid_reason,omitempty"`
	Score         *float64   `json:"score"` // raw metric value; nil when not valid
	Metric        string     `json:"metric"`
	Evaluator     string     `json:"evaluator"`
	Telemetry     any        `json:"telemetry,omitempty"` // utilisation samples, peak memory, ...
	// Attempt numbers the runs of one slot by one lab, from 1 (absent in older envelopes:
	// read as 1). A retry after an infrastructure failure, or a re-run after a lapsed lease,
	// is a new attempt; equivocation is two different attestations for one (slot, lab, attempt).
	Attempt int `json:"attempt,omitempty"`
	// Executor says how contained the run was; nil in envelopes older than the field, which
	// the default acceptance policy treats as not isolated.
	Executor *ExecutorInfo `json:"executor,omitempty"`
	// Build names the evalmesh build that ran and signed this run.
	Build *BuildInfo `json:"build,omitempty"`
	// Model is the model served beside the agent, when its spec names one.
	Model *ModelRun `json:"model,omitempty"`
	// Heureka is set on HeurekaBench runs (heureka.go): the judge and per-question outcome.
	Heureka *HeurekaRunInfo `json:"heureka,omitempty"`
	// Witness is the ID of a witness record (witness.go) of the run's campaign by a lab other
	// than the campaign's, known when the run was signed; a network that requires witnesses
	// counts no run without one (AcceptPolicy.RequireWitness).
	Witness string `json:"witness,omitempty"`
	// ScoreAbsent: the runner signs no score. Its slot is of a sealed task that the network
	// document has scored only by the labs it names (ledger.scorers, AcceptPolicy.Scorers),
	// and the runner's lab is not one of them, so it holds no labels: Valid is false, Score
	// nil, InvalidReason may be empty, and the ledger takes the result from the scoring
	// labs' verdicts (their re-scores of the submission) instead. Absent in every other run.
	ScoreAbsent bool `json:"score_absent,omitempty"`
}

// ModelRun is what a run attests of the model served beside its agent: which model (image
// and weights, by digest) and what each of the two containers used. The predicate's own
// gpu_seconds and energy_joules are the run's totals (model and agent together).
type ModelRun struct {
	Name    string          `json:"name"`
	Image   string          `json:"image"`
	Weights []WeightsDigest `json:"weights,omitempty"`
	// GPUCount, GPUSeconds and EnergyJoules are the model container's; AgentGPUCount,
	// AgentGPUSeconds and AgentEnergyJoules the agent container's.
	GPUCount          int     `json:"gpu_count"`
	GPUSeconds        float64 `json:"gpu_seconds"`
	EnergyJoules      float64 `json:"energy_joules"`
	AgentGPUCount     int     `json:"agent_gpu_count"`
	AgentGPUSeconds   float64 `json:"agent_gpu_seconds"`
	AgentEnergyJoules float64 `json:"agent_energy_joules"`
	// ReadySeconds is how long the model took from its start to its first ready probe.
	ReadySeconds float64 `json:"ready_seconds"`
}

// WeightsDigest names one read-only weight folder the model was given.
type WeightsDigest struct {
	Name   string `json:"name"`
	Digest string `json:"digest"` // UnixFS root CID of the folder
}

// Isolation levels an executor can report in ExecutorInfo.Isolation.
const (
	// IsolationContainer: the agent ran in its own mount, network and pid namespaces with
	// private/ unreachable (the docker executor).
	IsolationContainer = "container"
	// IsolationProcess: the agent ran as a host process; it could read what the node's
	// uid (or the uid it was given) can read. Counted only where a network opts in.
	IsolationProcess = "process"
)

// ExecutorInfo records the executor of a run and what it could really enforce.
type ExecutorInfo struct {
	Name      string `json:"name"`      // "docker", "process", ...
	Isolation string `json:"isolation"` // IsolationContainer or IsolationProcess
	// Limits is how resource limits were applied: "cgroup2", "cgroup1", "rlimit" or "none".
	Limits string `json:"limits"`
	// SeparateUID is true when the agent ran under a uid other than the node's.
	SeparateUID bool `json:"separate_uid,omitempty"`
	// Engine names the container engine and its version that ran the agent ("docker
	// 24.0.7", "podman 4.3.1"); absent for executors without one and in older envelopes.
	Engine string `json:"engine,omitempty"`
	// Partition and Node name where a scheduler (the slurm executor) ran the agent.
	Partition string `json:"partition,omitempty"`
	Node      string `json:"node,omitempty"`
}

// BuildInfo identifies the evalmesh binary (runtime/debug.ReadBuildInfo).
type BuildInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // module version, "(devel)" for a local build
	Revision string `json:"revision,omitempty"` // vcs.revision
	Modified bool   `json:"modified,omitempty"` // vcs.modified: built from a dirty tree
}

// AttemptNumber is the run's attempt, with an absent attempt read as 1.
func (p *RunPredicate) AttemptNumber() int {
	if p.Attempt <= 0 {
		return 1
	}
	return p.Attempt
}

// RescorePredicate is a lab's independent re-check of another run's submission.
type RescorePredicate struct {
	Run       string   `json:"run"` // ID of the run attestation re-scored
	Score     *float64 `json:"score"`
	Valid     bool     `json:"valid"`
	Metric    string   `json:"metric"`
	Evaluator string   `json:"evaluator"`
	Node      string   `json:"node"`
	Lab       string   `json:"lab"`
	// Time is when the re-score was made, set by its signer. The ledger checks the
	// signer's certificate at this time (VerifyOptions.AtClaimedTime); a re-score without
	// it is refused there as ReasonNoClaimedTime. Optional in the format (added to v1 as
	// in-toto allows: older readers ignore it).
	Time time.Time `json:"time,omitzero"`
	// Draw is the signing node's re-scorer draw for the run (RescoreDraw): the hex RFC 9381
	// ECVRF proof, 160 digits, by its node key, or by its lab's draw key where the network
	// document names one (DrawKeys), over RescoreAlpha(the run's slot, attempt and lab).
	// Where the network draws re-scorers (AcceptPolicy.RescorerDraw) a re-score votes only
	// with a draw that drew its lab (RescoreVoters). Optional (added to v1 as in-toto
	// allows: older readers ignore it); checked against the run by the ledger, which has it.
	Draw string `json:"draw,omitempty"`
}

// NewStatement builds the bytes of an in-toto Statement v1. The predicate is marshalled
// as given; the result is what Sign signs, once.
func NewStatement(subjects []Subject, predicateType string, predicate any) ([]byte, error) {
	pred, err := json.Marshal(predicate)
	if err != nil {
		return nil, fmt.Errorf("marshal predicate: %w", err)
	}
	// A map in the predicate (telemetry) or in annotations may hold keys differing only in
	// case: refuse to make a statement readers would read two ways.
	if err := jsonkeys.Check(pred); err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	for i, sub := range subjects {
		if b, err := json.Marshal(sub); err == nil {
			if err := jsonkeys.Check(b); err != nil {
				return nil, fmt.Errorf("statement subject %d (%q): %w", i, sub.Name, err)
			}
		}
	}
	st := Statement{Type: StatementTypeV1, Subject: subjects, PredicateType: predicateType, Predicate: pred}
	if err := st.validate(); err != nil {
		return nil, err
	}
	if predicateType == PredicateRunV1 || predicateType == PredicateRescoreV1 {
		if _, _, err := decodePredicate(predicateType, pred); err != nil {
			return nil, err
		}
	}
	return json.Marshal(st)
}

// ParseStatement decodes and checks an in-toto Statement v1 (not its predicate).
func ParseStatement(b []byte) (*Statement, error) {
	var st Statement
	if err := strictUnmarshal(b, &st, false); err != nil {
		return nil, fmt.Errorf("statement is not valid JSON of the in-toto Statement v1 shape: %w", err)
	}
	if err := st.validate(); err != nil {
		return nil, err
	}
	return &st, nil
}

// SubmissionDigest returns the sha256 of the subject marked RoleSubmission, or "" if none.
func (st *Statement) SubmissionDigest() string {
	for _, s := range st.Subject {
		if r, _ := s.Annotations[AnnotationRole].(string); r == RoleSubmission {
			return s.Digest["sha256"]
		}
	}
	return ""
}

func (st *Statement) validate() error {
	if st.Type != StatementTypeV1 {
		return fmt.Errorf("statement _type is %q, want %q", st.Type, StatementTypeV1)
	}
	if len(st.Subject) == 0 {
		return errors.New("statement has no subject: list at least one artifact with a sha256 digest")
	}
	for i, s := range st.Subject {
		if len(s.Digest) == 0 {
			return fmt.Errorf("statement subject %d (%q) has no digest", i, s.Name)
		}
		for alg, d := range s.Digest {
			if d == "" {
				return fmt.Errorf("statement subject %d (%q): empty %s digest", i, s.Name, alg)
			}
			if alg == "sha256" {
				if len(d) != 64 || !isLowerHex(d) {
					return fmt.Errorf("statement subject %d (%q): sha256 digest %q is not 64 lowercase hex digits", i, s.Name, d)
				}
			}
		}
		if c, ok := s.Annotations[AnnotationCID]; ok {
			if _, isStr := c.(string); !isStr {
				return fmt.Errorf("statement subject %d (%q): annotation cid must be a string", i, s.Name)
			}
		}
	}
	if st.PredicateType == "" {
		return errors.New("statement has no predicateType")
	}
	if len(st.Predicate) > 0 && (st.Predicate[0] != '{') {
		return errors.New("statement predicate must be a JSON object")
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// decodePredicate decodes and checks an evalmesh predicate; exactly one result is non-nil.
func decodePredicate(predicateType string, raw json.RawMessage) (*RunPredicate, *RescorePredicate, error) {
	if len(raw) == 0 {
		return nil, nil, fmt.Errorf("predicate %s is missing", predicateType)
	}
	switch predicateType {
	case PredicateRunV1:
		var p RunPredicate
		if err := strictUnmarshal(raw, &p, false); err != nil {
			return nil, nil, fmt.Errorf("run predicate: %w", err)
		}
		if err := p.validate(); err != nil {
			return nil, nil, fmt.Errorf("run predicate: %w", err)
		}
		return &p, nil, nil
	case PredicateRescoreV1:
		var p RescorePredicate
		if err := strictUnmarshal(raw, &p, false); err != nil {
			return nil, nil, fmt.Errorf("rescore predicate: %w", err)
		}
		if err := p.validate(); err != nil {
			return nil, nil, fmt.Errorf("rescore predicate: %w", err)
		}
		return nil, &p, nil
	}
	return nil, nil, fmt.Errorf("predicate type %s is not an evalmesh predicate", predicateType)
}

func (p *RunPredicate) validate() error {
	switch {
	case p.Slot.Campaign == "" || p.Slot.Task == "" || p.Slot.Agent == "":
		return errors.New("slot needs campaign, task and agent")
	case p.Slot.Seed < 0:
		return fmt.Errorf("slot seed %d is negative", p.Slot.Seed)
	case p.Node == "":
		return errors.New("node (the signer's peer ID) is missing")
	case p.Start.IsZero() || p.End.IsZero():
		return errors.New("start and end are required")
	case p.End.Before(p.Start):
		return fmt.Errorf("end %s is before start %s", p.End.Format(time.RFC3339), p.Start.Format(time.RFC3339))
	case p.WallSeconds < 0 || p.GPUSeconds < 0 || p.EnergyJoules < 0:
		return errors.New("wall_seconds, gpu_seconds and energy_joules must not be negative")
	case p.Hardware.GPUCount < 0:
		return errors.New("hardware gpu_count is negative")
	case p.Attempt < 0:
		return fmt.Errorf("attempt %d is negative; attempts count from 1 (absent means 1)", p.Attempt)
	case p.Metric == "":
		return errors.New("metric is missing")
	case p.Evaluator == "":
		return errors.New("evaluator is missing")
	case p.ScoreAbsent && (p.Valid || p.Score != nil):
		return errors.New("a run with score_absent carries neither valid nor a score: its scoring labs' verdicts give them")
	case p.Valid && p.Score == nil:
		return errors.New("a valid run needs a score")
	case !p.Valid && p.InvalidReason == "" && !p.ScoreAbsent:
		return errors.New("an invalid run needs invalid_reason")
	}
	if p.Score != nil && (math.IsNaN(*p.Score) || math.IsInf(*p.Score, 0)) {
		return errors.New("score is not finite")
	}
	if p.Heureka != nil {
		return p.Heureka.validate(p.Valid)
	}
	return nil
}

func (p *RescorePredicate) validate() error {
	switch {
	case p.Run == "":
		return errors.New("run (the ID of the run attestation re-scored) is missing")
	case p.Node == "":
		return errors.New("node (the signer's peer ID) is missing")
	case p.Metric == "":
		return errors.New("metric is missing")
	case p.Evaluator == "":
		return errors.New("evaluator is missing")
	case p.Valid && p.Score == nil:
		return errors.New("a valid re-score needs a score")
	case p.Draw != "" && (len(p.Draw) != 2*ecvrf.ProofSize || !isLowerHex(p.Draw)):
		return fmt.Errorf("draw is not %d lowercase hex digits (an RFC 9381 proof)", 2*ecvrf.ProofSize)
	}
	return nil
}

// strictUnmarshal decodes exactly one JSON value. Unknown fields are ignored, as in-toto
// requires (minor predicate versions add fields without changing predicateType), unless
// noUnknown is set (evalmesh's own certificate and revocation bodies).
//
// Either way, an object at any depth that repeats a key or holds keys differing only in
// case is refused (jsonkeys.Check): encoding/json would read the last, other readers the
// first or the exact one, so the signed bytes would mean two things.
func strictUnmarshal(b []byte, v any, noUnknown bool) error {
	if !noUnknown {
		if err := json.Unmarshal(b, v); err != nil {
			return err
		}
		return jsonkeys.Check(b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return jsonkeys.Check(b)
}
