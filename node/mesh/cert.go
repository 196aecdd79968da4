package mesh

import (
	"bytes"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
)

// A certificate renewed on disk (`evalmesh lab certify … > HOME/node-cert.json`) is taken
// without a restart: certWatch re-reads the file when its modification time or size
// changes (polled every Options.CertEvery, default 10 s: a stat, where an inotify
// watch would miss an editor's rename-over and is not on every filesystem), checks it
// (this node's, of a trusted lab, valid now: attest.CheckSigningChain) and hands it to the
// runner (runs sign under it from then on) and the claim machine (its messages carry it,
// and it claims slots the old one would have expired during: protocol/claim_cert.go). It
// logs the renewal at INFO and a file it cannot use at WARN, keeping the certificate it has.

const defaultCertEvery = 10 * time.Second

// certEvery is how often the certificate, trust and network files are checked for changes.
func (o Options) certEvery() time.Duration {
	if o.CertEvery <= 0 {
		return defaultCertEvery
	}
	return o.CertEvery
}

// certWatch is the certificate's poller, on a goroutine of its own; it has no state of its
// own besides shared's and hands the claim machine a renewal with decide.
type certWatch struct{ *shared }

func (c certWatch) watch() {
	defer c.wg.Done()
	path := c.opts.Runner.Home.CertPath()
	c.onChange(path, func() { c.changed(path) }) // revoke.go
}

// changed takes the certificate at path, if this node can use it.
func (c certWatch) changed(path string) {
	cert, err := attest.LoadNodeCert(path)
	if err == nil {
		err = attest.CheckSigningChain(c.opts.Runner.Key, cert, c.opts.Trust, c.opts.Now())
	}
	if err != nil {
		c.opts.Warnf("mesh: node certificate %s changed but cannot be used (keeping the one valid until %s): %v",
			path, c.opts.Runner.CurrentCert().NotAfter.Format(time.RFC3339), err)
		return
	}
	if old := c.opts.Runner.CurrentCert(); old != nil && bytes.Equal(old.Raw(), cert.Raw()) {
		return
	}
	c.opts.Runner.SetCert(cert)
	c.decide(func(co *protocol.Coordinator, now time.Time) protocol.CoordActions {
		return co.SetCertificate(cert.Raw(), cert.NotAfter, now)
	})
	c.opts.Logf("mesh: node certificate renewed from %s: valid until %s", path, cert.NotAfter.Format(time.RFC3339))
}
