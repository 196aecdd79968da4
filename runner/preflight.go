package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// ErrUncertified refuses a run on a node without a certificate unless the caller asked for
// self-signed attestations (Runner.SelfSigned).
var ErrUncertified = errors.New("this node has no node certificate")

// CheckSigning is the run's preflight, done before any GPU is held or agent started: would
// what this node signs at the end of a run that lasts up to maxWall be accepted? It refuses a
// certificate for another node, one not valid now or expiring before the run could end, a
// revoked one or one of a lab Trust does not list (attest.CheckSigningChain), and, unless
// SelfSigned, a node without a certificate.
func (r *Runner) CheckSigning(maxWall time.Duration) error {
	if r.Key == nil {
		return errors.New("run: no signing key (load the node identity first)")
	}
	node, err := peer.IDFromPrivateKey(r.Key)
	if err != nil {
		return err
	}
	cert := r.CurrentCert()
	if cert == nil {
		if r.SelfSigned {
			return nil
		}
		return fmt.Errorf("%w (%s): its attestations would count only where a trust file lists node %s itself. "+
			"Get one from your lab (`evalmesh lab certify --lab LABDIR --node %s > %s`), "+
			"or pass --self-signed to sign with the node key alone", ErrUncertified, r.Home.CertPath(), node, node, r.Home.CertPath())
	}
	now := r.now()
	if err := attest.CheckSigningChain(r.Key, cert, r.Trust, now); err != nil {
		return fmt.Errorf("run refused before it starts: %w", err)
	}
	if maxWall > 0 {
		end := now.Add(maxWall)
		if err := attest.CheckSigningChain(r.Key, cert, r.Trust, end); err != nil {
			return fmt.Errorf("run refused before it starts: the task may run until %s (its wall-clock limit) and then: %w",
				end.Format(time.RFC3339), err)
		}
	}
	return nil
}

// nextAttempt numbers a new run of slot: one more than the highest attempt of this node's
// runs of the slot that did not fail (runs, HOME/runs) and of the attestations of the slot
// in HOME/attestations signed by this node or, for a certified node, by its lab. A slot run
// again is thus a new attempt, never a second attestation of the same attempt (which peers
// would read as equivocation). Call it under lockRuns.
func (r *Runner) nextAttempt(runs []*RunState, slot attest.Slot) int {
	top := 0
	attempt := func(a int) int {
		if a <= 0 {
			return 1 // absent: read as 1 (attest.RunPredicate.Attempt)
		}
		return a
	}
	for _, o := range runs {
		if o.Phase != PhaseFailed && !o.Audit && (attest.Slot{Campaign: o.Campaign, Task: o.TaskCID, Agent: o.AgentCID, Seed: o.Seed}) == slot {
			top = max(top, attempt(o.Attempt))
		}
	}
	node := ""
	if id, err := peer.IDFromPrivateKey(r.Key); err == nil {
		node = id.String()
	}
	files, _, _ := attest.ReadEnvelopeDir(r.Home.AttestationsDir())
	for _, f := range files {
		p := runPredicateOf(f.Data)
		if p == nil || p.Slot != slot || !(p.Node == node || r.Lab != "" && p.Lab == r.Lab) {
			continue
		}
		top = max(top, attempt(p.Attempt))
	}
	return top + 1
}

// runPredicateOf reads the run predicate of an envelope of this home (nil if it is none).
func runPredicateOf(env []byte) *attest.RunPredicate {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return nil
	}
	stmt, err := attest.ParseStatement(e.Payload)
	if err != nil || stmt.PredicateType != attest.PredicateRunV1 {
		return nil
	}
	var p attest.RunPredicate
	if jsonUnmarshal(stmt.Predicate, &p) != nil {
		return nil
	}
	return &p
}

// Drawer is the key this node draws with (attest.RescoreDraw, attest.AuditDraw): the lab's
// DrawKey where it has one, else the node's Key.
func (r *Runner) Drawer() crypto.PrivKey {
	if r.DrawKey != nil {
		return r.DrawKey
	}
	return r.Key
}

// CurrentCert is the node certificate runs sign under now (Cert, or the last SetCert).
func (r *Runner) CurrentCert() *attest.NodeCert {
	r.certMu.RLock()
	defer r.certMu.RUnlock()
	return r.Cert
}

// SetCert swaps in a renewed node certificate: runs that sign from now on use it. The
// caller has checked it (the node's, of a trusted lab, valid now).
func (r *Runner) SetCert(c *attest.NodeCert) {
	r.certMu.Lock()
	defer r.certMu.Unlock()
	r.Cert = c
}
