package protocol

import (
	"encoding/json"
	"time"
)

// The node certificate's expiry (docs/protocol-claims.md rule 9a). A run's attestation
// counts only if the certificate that signs it is valid when the run ends; the runner's
// preflight refuses a run that could outlast it, which ends the run as an infrastructure
// failure, so a node whose certificate nears its end would fail every slot it claims (real
// tasks run for hours: hours before the expiry). The machine therefore claims a slot only
// while CertNotAfter is beyond now + the slot's hard limit + CertMargin, and takes a renewed
// certificate without a restart (SetCertificate).

// certCovers reports whether this node's certificate outlasts a run of s started now.
func (m *ClaimMachine) certCovers(s *slotState, now time.Time) bool {
	if m.cfg.CertNotAfter.IsZero() {
		return true
	}
	// The slot's own hard limit (task wall clock plus grace), not the 24 h default: a slot
	// whose task's limit is unknown needs only the margin.
	return now.Add(s.spec.HardLimit + m.cfg.CertMargin).Before(m.cfg.CertNotAfter)
}

// SetCertificate replaces this node's certificate (a renewed one): its envelope goes into
// every message from now on, and slots skipped because the old one would have expired
// before their runs could end are claimable again.
func (m *ClaimMachine) SetCertificate(cert json.RawMessage, notAfter time.Time, now time.Time) Actions {
	m.now = now
	m.cfg.Cert, m.cfg.CertNotAfter = cert, notAfter
	for _, c := range m.campaigns {
		c.cursor = 0 // the untouched scan skipped slots for the old certificate
	}
	return m.finish(now)
}
