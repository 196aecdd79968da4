package mesh

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
)

// A certificate renewed on disk is taken at the next poll of the mesh's clock
// (Options.CertEvery), not before: the runner signs under it and the loop is handed
// the claim machine's update. No host: the watcher's mesh has only what it reads.
func TestCertRenewalPollsOnTheMeshClock(t *testing.T) {
	f, err := attestgen.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	trust, err := attestgen.Trust(f)
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(attestgen.Base)
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.CertPath(), f.Cert.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Home: h, Key: f.Node, Cert: f.Cert}
	m := &shared{events: make(chan func(), 8),
		opts: Options{Clock: fake, Now: fake.Now, Runner: r, Trust: trust, CertEvery: time.Minute, Logf: t.Logf, Warnf: t.Logf}}
	m.ctx, m.stop = context.WithCancel(context.Background())
	m.wg.Add(1)
	go certWatch{m}.watch()
	t.Cleanup(func() { m.stop(); m.wg.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the poll ticker is made
		t.Fatal(err)
	}

	renewed, err := f.Lab.Certify(f.NodeID, attestgen.Base.Add(-time.Hour), 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.CertPath(), renewed.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	fake.Advance(59 * time.Second)
	if r.CurrentCert() != f.Cert || len(m.events) != 0 {
		t.Fatal("the renewed certificate was taken before the poll interval passed on the mesh's clock")
	}
	fake.Advance(time.Second)
	testutil.WaitFor(t, 10*time.Second, "the renewed certificate taken at the poll", func() bool {
		return r.CurrentCert().NotAfter.Equal(renewed.NotAfter)
	})
	testutil.WaitFor(t, 10*time.Second, "the claim machine's update handed to the loop", func() bool { return len(m.events) == 1 })
}
