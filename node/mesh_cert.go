package node

import (
	"bytes"
	"os"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// A certificate renewed on disk (`evalmesh lab certify … > HOME/node-cert.json`) is taken
// without a restart: watchCert re-reads the file when its modification time or size
// changes (polled every MeshOptions.CertEvery, default 10 s: a stat, where an inotify
// watch would miss an editor's rename-over and is not on every filesystem), checks it
// (this node's, of a trusted lab, valid now: attest.CheckSigningChain) and hands it to the
// runner (runs sign under it from then on) and the claim machine (its messages carry it,
// and it claims slots the old one would have expired during: protocol/claim_cert.go). It
// logs the renewal at INFO and a file it cannot use at WARN, keeping the certificate it has.

const defaultCertEvery = 10 * time.Second

func (m *Mesh) watchCert() {
	defer m.wg.Done()
	path := m.opts.Runner.Home.CertPath()
	every := m.opts.CertEvery
	if every <= 0 {
		every = defaultCertEvery
	}
	var seenMod time.Time
	var seenSize int64 = -1
	if fi, err := os.Stat(path); err == nil {
		seenMod, seenSize = fi.ModTime(), fi.Size()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(path)
		if err != nil || fi.ModTime().Equal(seenMod) && fi.Size() == seenSize {
			continue
		}
		seenMod, seenSize = fi.ModTime(), fi.Size()
		cert, err := attest.LoadNodeCert(path)
		if err == nil {
			err = attest.CheckSigningChain(m.opts.Runner.Key, cert, m.opts.Trust, m.opts.Now())
		}
		if err != nil {
			m.n.opts.Warnf("mesh: node certificate %s changed but cannot be used (keeping the one valid until %s): %v",
				path, m.opts.Runner.CurrentCert().NotAfter.Format(time.RFC3339), err)
			continue
		}
		if old := m.opts.Runner.CurrentCert(); old != nil && bytes.Equal(old.Raw(), cert.Raw()) {
			continue
		}
		m.opts.Runner.SetCert(cert)
		m.do(func() {
			m.apply(m.coord.SetCertificate(cert.Raw(), cert.NotAfter, m.opts.Now()))
		})
		m.n.opts.Logf("mesh: node certificate renewed from %s: valid until %s", path, cert.NotAfter.Format(time.RFC3339))
	}
}
