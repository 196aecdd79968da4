package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/evalmesh/evalmesh/scoring"
)

// RoleVerdicts marks a HeurekaBench run's judge verdict file (scoring.JudgeVerdicts): per
// question the atomic facts the judge found, their labels and its 1–5 score.
const RoleVerdicts = "verdicts"

// MaxJudgePromptBytes bounds the judge prompt a run attests.
const MaxJudgePromptBytes = 64 << 10

// HeurekaRunInfo is what a HeurekaBench run attests beyond the score (RunPredicate.Heureka):
// which judge scored it — its image digest and command, the model digest it ran and the
// prompt it was given — the sha256 of the verdict subject, and the per-question outcome
// the ledger pools (empty when the run is invalid).
type HeurekaRunInfo struct {
	Judge     JudgeInfo                 `json:"judge"`
	Verdicts  string                    `json:"verdicts,omitempty"` // sha256 of the RoleVerdicts subject
	Questions []scoring.HeurekaQuestion `json:"questions,omitempty"`
}

// JudgeInfo pins the judge of a HeurekaBench task.
type JudgeInfo struct {
	Image        string   `json:"image"`
	Command      []string `json:"command,omitempty"`
	Model        string   `json:"model"`
	Prompt       string   `json:"prompt"`
	PromptSHA256 string   `json:"prompt_sha256"`
}

// PromptDigest is the hex sha256 of a judge prompt.
func PromptDigest(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(sum[:])
}

func (h *HeurekaRunInfo) validate(valid bool) error {
	j := h.Judge
	switch {
	case j.Image == "":
		return errors.New("heureka judge image is missing")
	case j.Model == "":
		return errors.New("heureka judge model is missing")
	case len(j.Prompt) > MaxJudgePromptBytes:
		return fmt.Errorf("heureka judge prompt is %d bytes, over %d", len(j.Prompt), MaxJudgePromptBytes)
	case j.PromptSHA256 != PromptDigest(j.Prompt):
		return errors.New("heureka judge prompt_sha256 is not the sha256 of its prompt")
	}
	if !valid {
		return nil
	}
	if len(h.Verdicts) != 64 || !isLowerHex(h.Verdicts) {
		return errors.New("heureka verdicts: a valid run names its verdict subject's sha256")
	}
	if err := scoring.CheckHeurekaQuestions(h.Questions); err != nil {
		return fmt.Errorf("heureka questions: %w", err)
	}
	return nil
}
