package attest

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/internal/ecvrf"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PredicateAuditV1 marks an audit: a node's signed re-execution of another lab's run (the
// same agent image, bundle and seed, on the auditor's own node) and what it found
// (docs/attestation-format.md "Audit predicate", docs/scoring.md "Audits"). Its one subject
// is the audited run's envelope (sha256 of its bytes, as in the run's ID).
const PredicateAuditV1 = "https://evalmesh.dev/audit/v1"

// Audit verdicts.
const (
	// VerdictMatch: the re-execution agrees with the run (the same submission for a
	// deterministic agent; within the statistical allowance for a stochastic one).
	VerdictMatch = "match"
	// VerdictMismatch: a deterministic agent on the same GPU model gave another submission.
	VerdictMismatch = "mismatch"
	// VerdictInconclusive: the audit cannot decide alone (a stochastic agent, another GPU
	// model, a failed re-execution); its result still feeds the statistical test.
	VerdictInconclusive = "inconclusive"
)

// AuditPredicate is an audit's predicate.
type AuditPredicate struct {
	Run     string `json:"run"`     // ID of the audited run attestation
	Slot    Slot   `json:"slot"`    // the audited run's slot
	Attempt int    `json:"attempt"` // the audited run's attempt (≥ 1)
	RunLab  string `json:"run_lab"` // the audited run's lab (part of the draw's input)
	// VRFProof is the hex RFC 9381 proof (ecvrf.ProofSize bytes) by the signing node's key
	// over AuditAlpha(Slot, Attempt, RunLab): the draw that chose this auditor.
	VRFProof string `json:"vrf_proof"`
	// DrawKey is the base64 ed25519 public key that made VRFProof where it is the signing
	// lab's draw key (DrawKeys); absent where the node's own key drew. Which key may draw
	// for a lab is the network document's to say, so the ledger checks it (judgeAudits).
	DrawKey string      `json:"draw_key,omitempty"`
	Result  AuditResult `json:"result"`
	Verdict string      `json:"verdict"`
	Reason  string      `json:"reason,omitempty"` // why, for mismatch and inconclusive
	Node    string      `json:"node"`             // the signer's peer ID
	Lab     string      `json:"lab"`              // the signer's lab ID
	Time    time.Time   `json:"time"`             // when the audit was signed, by its clock
}

// AuditResult is what the auditor's own re-execution produced.
type AuditResult struct {
	Submission string     `json:"submission,omitempty"` // sha256 of the submission; "" when none
	Valid      bool       `json:"valid"`
	Score      *float64   `json:"score"` // raw metric value; nil when not valid
	Exit       ExitStatus `json:"exit"`
	GPUModel   string     `json:"gpu_model"` // "" on a CPU-only node
	// Transcript is the shape of the re-execution's transcript (calls, tokens), which the
	// ledger compares with the run's (JudgeAudit); nil when it recorded none. Absent from
	// audits signed before the field, whose bytes do not change.
	Transcript *TranscriptShape `json:"transcript,omitempty"`
}

// AuditAlpha is the VRF input of the audit draw of a run: its slot, attempt and lab. Each is
// fixed when the slot is claimed, before the run's outcome exists, so the runner cannot
// re-sign its way to another draw, and the auditor's VRF output on it is unique, so the
// auditor cannot grind it either. The run's attestation ID is left out on purpose: the
// runner chooses it (any re-signature changes it).
func AuditAlpha(slot Slot, attempt int, runLab string) []byte {
	return drawAlpha("evalmesh/audit/v1", slot, attempt, runLab)
}

// drawAlpha is a VRF input over a run's slot, attempt and lab under domain, NUL-separated,
// so that one lab's draws for different purposes (audits, re-scorers) are independent.
func drawAlpha(domain string, slot Slot, attempt int, runLab string) []byte {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte(0)
	b.WriteString(slot.String())
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(attempt))
	b.WriteByte(0)
	b.WriteString(runLab)
	return []byte(b.String())
}

// AuditDraw returns the VRF proof and output of the node of key for the run of (slot,
// attempt, runLab). Only ed25519 node keys can draw.
func AuditDraw(key crypto.PrivKey, slot Slot, attempt int, runLab string) (proof, beta []byte, err error) {
	return vrfDraw("audit", key, AuditAlpha(slot, attempt, runLab))
}

// VerifyAuditDraw checks a VRF proof of node over the run's draw input and returns its
// output. A node whose peer ID does not embed an ed25519 key cannot have drawn.
func VerifyAuditDraw(node string, proofHex string, slot Slot, attempt int, runLab string) ([]byte, error) {
	return vrfVerify(node, proofHex, AuditAlpha(slot, attempt, runLab))
}

// vrfDraw is the RFC 9381 VRF proof and output of the node key over alpha (what draws,
// for the error).
func vrfDraw(what string, key crypto.PrivKey, alpha []byte) (proof, beta []byte, err error) {
	if key.Type() != crypto.Ed25519 {
		return nil, nil, fmt.Errorf("%s draws need an ed25519 node key, not %s", what, key.Type())
	}
	raw, err := key.Raw()
	if err != nil {
		return nil, nil, err
	}
	proof, beta = ecvrf.Prove(ed25519.PrivateKey(raw), alpha)
	return proof, beta, nil
}

// vrfVerify checks the hex VRF proof of node over alpha and returns its output.
func vrfVerify(node, proofHex string, alpha []byte) ([]byte, error) {
	id, err := peer.Decode(node)
	if err != nil {
		return nil, fmt.Errorf("node %q is not a peer ID: %v", node, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("node %s has no embedded ed25519 key to check its draw", node)
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, err
	}
	beta, err := vrfVerifyKey(ed25519.PublicKey(raw), proofHex, alpha)
	if err != nil {
		return nil, fmt.Errorf("%w (node %s)", err, node)
	}
	return beta, nil
}

// vrfVerifyKey checks the hex VRF proof under the ed25519 key pub over alpha and returns its
// output.
func vrfVerifyKey(pub ed25519.PublicKey, proofHex string, alpha []byte) ([]byte, error) {
	proof, err := hex.DecodeString(proofHex)
	if err != nil || len(proof) != ecvrf.ProofSize {
		return nil, fmt.Errorf("vrf_proof is not %d bytes of hex", ecvrf.ProofSize)
	}
	beta, err := ecvrf.Verify(pub, proof, alpha)
	if err != nil {
		return nil, errors.New("vrf_proof does not verify under the drawing key for this run's slot, attempt and lab")
	}
	return beta, nil
}

func (a *AuditPredicate) validate() error {
	switch {
	case a.Run == "":
		return errors.New("run (the audited run's ID) is missing")
	case a.Slot.Campaign == "" || a.Slot.Task == "" || a.Slot.Agent == "":
		return errors.New("slot needs campaign, task and agent")
	case a.Slot.Seed < 0:
		return fmt.Errorf("slot seed %d is negative", a.Slot.Seed)
	case a.Attempt < 1:
		return fmt.Errorf("attempt %d: attempts count from 1", a.Attempt)
	case !strings.HasPrefix(a.RunLab, "lab:"):
		return fmt.Errorf("run_lab %q is not a lab ID (lab:…)", a.RunLab)
	case !strings.HasPrefix(a.Lab, "lab:"):
		return fmt.Errorf("lab %q is not a lab ID (lab:…)", a.Lab)
	case a.Lab == a.RunLab:
		return fmt.Errorf("lab %s audits its own run: audits are by other labs", a.Lab)
	case a.Node == "":
		return errors.New("node (the signer) is missing")
	case a.Time.IsZero():
		return errors.New("time is required")
	case a.Verdict != VerdictMatch && a.Verdict != VerdictMismatch && a.Verdict != VerdictInconclusive:
		return fmt.Errorf("verdict %q is not %s, %s or %s", a.Verdict, VerdictMatch, VerdictMismatch, VerdictInconclusive)
	case a.Verdict != VerdictMatch && a.Reason == "":
		return fmt.Errorf("a %s verdict needs a reason", a.Verdict)
	case a.Result.Valid && a.Result.Score == nil:
		return errors.New("a valid result needs a score")
	case a.Result.Score != nil && (math.IsNaN(*a.Result.Score) || math.IsInf(*a.Result.Score, 0)):
		return errors.New("result score is not finite")
	case a.Result.Submission != "" && (len(a.Result.Submission) != 64 || !isLowerHex(a.Result.Submission)):
		return fmt.Errorf("result submission %q is not 64 lowercase hex digits (sha256)", a.Result.Submission)
	case a.Verdict == VerdictMismatch && a.Result.Submission == "":
		return errors.New("a mismatch needs the auditor's submission digest")
	}
	if err := validateShape(a.Result.Transcript); err != nil {
		return err
	}
	if _, ok := digestOfID(a.Run); !ok {
		return fmt.Errorf("run %q is not an attestation ID", a.Run)
	}
	if a.DrawKey != "" {
		pub, err := ParseDrawKey(a.DrawKey)
		if err != nil {
			return fmt.Errorf("draw_key: %w", err)
		}
		_, err = vrfVerifyKey(pub, a.VRFProof, AuditAlpha(a.Slot, a.Attempt, a.RunLab))
		return err
	}
	if _, err := VerifyAuditDraw(a.Node, a.VRFProof, a.Slot, a.Attempt, a.RunLab); err != nil {
		return err
	}
	return nil
}

func decodeAuditPredicate(st *Statement) (*AuditPredicate, error) {
	if len(st.Predicate) == 0 {
		return nil, refuse(ReasonMalformedPredicate, "audit predicate is missing")
	}
	var a AuditPredicate
	if err := strictUnmarshal(st.Predicate, &a, false); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "audit predicate: %v", err)
	}
	if err := a.validate(); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "audit predicate: %v", err)
	}
	d, _ := digestOfID(a.Run)
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != hex.EncodeToString(d[:]) {
		return nil, refuse(ReasonMalformedPredicate, "audit of %s must have the run's envelope as its one subject (sha256 %x)", a.Run, d)
	}
	return &a, nil
}

// DecodeAudit decodes an audit's statement (the envelope's payload), including its VRF
// proof against the node it names. That the node is the envelope's signer is Verify's check
// (the predicate's node, as for runs); that the draw fell under the threshold is the
// protocol's (protocol.AuditDrawn), which knows the rate and the run's impact.
func DecodeAudit(payload []byte) (*AuditPredicate, error) {
	st, err := ParseStatement(payload)
	if err != nil {
		return nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	if st.PredicateType != PredicateAuditV1 {
		return nil, refuse(ReasonMalformedPredicate, "predicate type %q is not an audit (%s)", st.PredicateType, PredicateAuditV1)
	}
	return decodeAuditPredicate(st)
}

// NewAudit signs an audit by the node of key under cert. The caller fills a's run, slot,
// attempt, run lab, result, verdict and reason; NewAudit draws the VRF proof, with drawKey
// (the lab's draw key, DrawKeys) or, where it is nil, with key, and sets the node, lab and
// time.
func NewAudit(key, drawKey crypto.PrivKey, cert *NodeCert, a AuditPredicate, now time.Time) (envelope []byte, id string, err error) {
	node, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	a.DrawKey = ""
	if drawKey != nil {
		if a.DrawKey, err = DrawKeyString(drawKey); err != nil {
			return nil, "", err
		}
	} else {
		drawKey = key
	}
	proof, _, err := AuditDraw(drawKey, a.Slot, a.Attempt, a.RunLab)
	if err != nil {
		return nil, "", err
	}
	a.VRFProof = hex.EncodeToString(proof)
	a.Node = node.String()
	if cert != nil {
		a.Lab = cert.Lab
	}
	a.Time = now.UTC().Truncate(time.Second)
	if err := a.validate(); err != nil {
		return nil, "", fmt.Errorf("audit of %s: %w", a.Run, err)
	}
	d, _ := digestOfID(a.Run)
	st, err := NewStatement([]Subject{{Name: "run", Digest: map[string]string{"sha256": hex.EncodeToString(d[:])}}}, PredicateAuditV1, a)
	if err != nil {
		return nil, "", err
	}
	return Sign(key, cert, st)
}
