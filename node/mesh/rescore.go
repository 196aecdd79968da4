package mesh

import (
	"context"
	"fmt"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/runner"
)

// rescorer re-scores a run's submission against this node's copy of its bundle and signs
// the re-score, on the goroutine of the re-score duty (startRescore) or of an API call
// (Rescore); it has no state of its own besides shared's.
type rescorer struct {
	*shared
	objects *objects
}

// rescore re-scores run rec and stores the re-score; it returns its attestation ID.
func (rs rescorer) rescore(ctx context.Context, rec *runRecord) (string, error) {
	e, err := attest.DecodeEnvelope(rec.Envelope)
	if err != nil {
		return "", err
	}
	st, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		return "", fmt.Errorf("%s is not a run attestation", rec.ID)
	}
	var subName, subCID, subSum string
	for _, s := range st.Subject {
		if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
			subName, subSum = s.Name, s.Digest["sha256"]
			subCID, _ = s.Annotations[attest.AnnotationCID].(string)
		}
	}
	dir, err := rs.objects.bundleDir(ctx, run.Slot.Task)
	if err != nil {
		return "", err
	}
	var sub []byte
	if subCID != "" {
		if sub, err = rs.objects.fetchObject(ctx, subCID, subSum); err != nil {
			return "", err
		}
	}
	var out *runner.Rescored
	if sub == nil {
		// A run without a submission is re-scored as what it is: invalid, nothing to score.
		out, err = rs.opts.Runner.RescoreMissing(rec.ID, run, rec.Envelope, dir)
	} else {
		out, err = rs.opts.Runner.RescoreSubmission(ctx, rec.ID, run, sub, subName, subCID, dir)
	}
	if err != nil {
		return "", err
	}
	res, err := rs.store.Attestations().Add([][]byte{out.Envelope}, vstore.SourceLocal, "")
	if err != nil {
		return "", err
	}
	if len(res) == 1 && res[0].Status == vstore.StatusRefused {
		return "", fmt.Errorf("own re-score refused by the store: %s %s", res[0].Reason, res[0].Detail)
	}
	return out.AttestationID, nil
}
