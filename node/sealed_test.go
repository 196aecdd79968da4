package node

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// grepHome fails if any regular file under dir (blockstore, datastore, store, everything)
// holds needle.
func grepHome(t *testing.T, dir string, needle []byte) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, needle) {
			t.Errorf("%s holds the labels in the clear", p)
		}
		return nil
	})
}

// TestSealedBundleServedWithoutGrantScoredAfterGrant: lab a seals and adds a bundle; a node
// of lab b, which holds no grant, fetches, pins and serves it to a third node, and can
// inspect it but not open it; a's grant to b reaches b by sync, after which b opens the
// labels. No blockstore, pin store or attestation store of any node holds the labels in the
// clear, and the CID is the same before and after the grant.
func TestSealedBundleServedWithoutGrantScoredAfterGrant(t *testing.T) {
	l := newSyncLabs(t)
	ageA, _ := age.GenerateX25519Identity()
	ageB, _ := age.GenerateX25519Identity()
	for _, x := range []struct {
		f  *attestgen.Fixture
		id *age.X25519Identity
	}{{l.a, ageA}, {l.b, ageB}} {
		if err := l.trust.SetAgeRecipient(x.f.Lab.ID, x.id.Recipient().String()); err != nil {
			t.Fatal(err)
		}
	}
	gen := t.TempDir()
	if _, err := exampletasks.Generate(gen); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(gen, "arithmetic")
	clear, err := tasks.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := os.ReadFile(clear.LabelsPath())
	if err != nil {
		t.Fatal(err)
	}
	sealed := filepath.Join(t.TempDir(), "arithmetic")
	key, err := tasks.Seal(src, sealed)
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	a := startNode(t, l.options(syncer.Options{}))
	b := startNode(t, l.options(syncer.Options{}))
	c := startNode(t, l.options(syncer.Options{}))
	root, err := a.Add(ctx, sealed, AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b, a)
	dirB := filepath.Join(t.TempDir(), "b-bundle")
	if err := b.Get(ctx, root, dirB, GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// b serves it: c, connected to b alone, fetches it from b.
	connect(t, c, b)
	dirC := filepath.Join(t.TempDir(), "c-bundle")
	if err := c.Get(ctx, root, dirC, GetOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := tasks.Inspect(ctx, dirB)
	if err != nil || info.CID != root.String() || !tasks.IsSealed(dirB) {
		t.Fatalf("inspect on b: %+v %v", info, err)
	}

	keysB := &runner.GrantKeys{Lab: l.b.Lab.ID, Identity: ageB, Trust: l.trust, Grants: GrantsIn(b.Store().Attestations())}
	var nk *runner.NoKeyError
	if _, err := keysB.DataKey(root.String()); !errors.As(err, &nk) {
		t.Fatalf("b without a grant: %v", err)
	}

	// a grants b; the grant is an envelope of the attestation set, accepted on gossip's
	// validator and carried by sync.
	env, _, err := attest.NewGrant(l.a.Node, l.a.Cert, root.String(), l.b.Lab.ID, ageB.Recipient().String(), key.String(), attestgen.Base)
	if err != nil {
		t.Fatal(err)
	}
	if v := protocol.ValidateAttestation(env, protocol.AttestationCheck{Trust: l.trust}); v.Verdict != protocol.Accept {
		t.Fatalf("gossip validator on a grant: %+v", v)
	}
	addLocal(t, a, [][]byte{env})
	if _, err := b.Syncer().SyncWith(ctx, a.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the grant on b", func() bool { return b.Store().Attestations().Len() == 1 })
	got, err := keysB.DataKey(root.String())
	if err != nil {
		t.Fatal(err)
	}
	opened, err := tasks.ReadSealedFile(dirB, got, clear.Meta.Evaluator.Labels, 1<<20)
	if err != nil || !bytes.Equal(opened, labels) {
		t.Fatalf("b opens the labels after the grant: %v", err)
	}
	if again, err := tasks.BundleCID(ctx, dirB); err != nil || again != root {
		t.Fatalf("CID after the grant %s, was %s (%v)", again, root, err)
	}
	for _, n := range []*Node{a, b, c} {
		grepHome(t, n.home.Dir, labels)
	}
}
