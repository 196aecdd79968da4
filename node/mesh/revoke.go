package mesh

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// A revocation reaches a running daemon without a restart (design.md §9, "A revoked node's
// work"). revocationPoller re-reads HOME/trust.yaml (where `evalmesh trust add
// --revocation` puts a lab's revocation) and HOME/network.json (whose `revocations` the
// labs sign with the rest of the document) when either file changes, polled as the
// certificate is (cert.go). Each revocation new to the trust store is added to it
// (the store, the validators and the runner's preflight share it, and adding only takes
// trust away) and said at WARN; then every stored attestation is restored again under the
// store, the runs and claim records it now refuses as revoked are handed to the
// coordinator (protocol.Coordinator.Voided: slots they alone finished are reopened, so
// honest nodes run them again), and the ledger is recomputed without them. A file that
// does not parse is said at WARN and changes nothing: the revocations held stay.

// watchedFile notices changes of a file by its modification time and size: a stat per
// poll, where an inotify watch would miss an editor's rename-over and is not on every
// filesystem.
type watchedFile struct {
	path string
	mod  time.Time
	size int64
}

func newWatchedFile(path string) *watchedFile {
	w := &watchedFile{path: path, size: -1}
	if fi, err := os.Stat(path); err == nil {
		w.mod, w.size = fi.ModTime(), fi.Size()
	}
	return w
}

// changed reports whether the file changed since the last call (or since newWatchedFile).
func (w *watchedFile) changed() bool {
	fi, err := os.Stat(w.path)
	if err != nil || fi.ModTime().Equal(w.mod) && fi.Size() == w.size {
		return false
	}
	w.mod, w.size = fi.ModTime(), fi.Size()
	return true
}

// onChange calls changed, on this goroutine, each time the file at path changes, until the
// mesh closes; files are polled every certEvery.
func (s *shared) onChange(path string, changed func()) {
	file := newWatchedFile(path)
	t := s.opts.Clock.NewTicker(s.opts.certEvery()) // the mesh's clock: tests poll on virtual time
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.Chan():
		}
		if file.changed() {
			changed()
		}
	}
}

// revocationPoller is the trust file's and network document's poller, one goroutine per
// file; it has no state of its own besides shared's (the trust store it adds to has its
// own lock) and hands what a revocation voids to the loop (voided, Mesh.voided).
type revocationPoller struct {
	*shared
	voided func(ids []string) // on the loop
	ledger *ledgerCalc
}

func (r revocationPoller) watch() {
	defer r.wg.Done()
	h := r.opts.Runner.Home
	var wg sync.WaitGroup
	for _, path := range []string{h.TrustPath(), h.NetworkDocPath()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.onChange(path, func() { r.changed(path) })
		}()
	}
	wg.Wait()
}

// changed adds the revocations of the trust file or network document at path
// that the trust store does not hold yet, and voids what they revoke.
func (r revocationPoller) changed(path string) {
	rs, err := revocationsIn(r.opts.Runner.Home, path, r.node.NetworkDoc)
	if err != nil {
		r.opts.Warnf("mesh: %s changed but its revocations cannot be read (keeping the %d held): %v", path, len(r.opts.Trust.Revocations()), err)
		return
	}
	added := 0
	for _, rv := range rs {
		if isNew, err := r.opts.Trust.AddNewRevocation(rv); err == nil && isNew {
			r.opts.Warnf("mesh: revocation %s read from %s: lab %s revoked %s at %s (%s): nothing signed under them counts any more",
				rv.ID, path, rv.Lab, strings.Join(slices.Concat(rv.Nodes, rv.Certs), ", "), rv.Time.Format(time.RFC3339), rv.Reason)
			added++
		}
	}
	if added > 0 {
		r.voidRevoked()
	}
}

// revocationsIn reads the revocations of h's trust file or network document (path is one
// of them), each with its signature checked.
func revocationsIn(h home.Home, path string, networkDoc func() (*protocol.NetworkDoc, error)) ([]*attest.Revocation, error) {
	if path == h.TrustPath() {
		ts, err := attest.LoadTrust(path)
		if err != nil {
			return nil, err
		}
		return ts.Revocations(), nil
	}
	d, err := networkDoc()
	if d == nil || err != nil {
		return nil, err
	}
	if len(d.Labs) >= 2 && !d.SignatureReport().Majority {
		return nil, fmt.Errorf("the document (hash %s) is not signed by a majority of its labs: its revocations take effect once it is (evalmesh network sign)", d.Hash())
	}
	return d.RevocationList()
}

// voidRevoked restores every stored attestation under the trust store, hands the runs and
// claim records it refuses as revoked to the coordinator, and recomputes the ledger.
func (r revocationPoller) voidRevoked() {
	var ids []string
	trust := r.opts.Trust
	err := r.store.Attestations().Each(func(_ recon.ID, env []byte) error {
		_, err := attest.Restore(env, trust)
		var ve *attest.VerifyError
		if errors.As(err, &ve) && ve.Reason == attest.ReasonCertRevoked {
			ids = append(ids, attest.EnvelopeID(env))
		}
		return nil
	})
	if err != nil {
		r.opts.Warnf("mesh: reading the store after a revocation: %v", err)
	}
	r.do(func() { r.voided(ids) })
	r.ledger.changed()
}

// voided hands the coordinator the attestations a revocation voids (ids), on the loop.
func (m *Mesh) voided(ids []string) {
	runs := 0
	for _, id := range ids {
		if m.runs[id] != nil {
			runs++
		}
	}
	a := m.coord.Voided(ids, m.opts.Now())
	m.opts.Warnf("mesh: %d stored attestation(s) signed under revoked keys no longer count, %d of them runs; %d slot(s) no counted run finishes any more are open again: %s",
		len(ids), runs, len(a.Reopened), strings.Join(a.Reopened, ", "))
	m.apply(a)
}
