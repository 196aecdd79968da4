package node

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// sealedMesh is the fixture of the tests of docs/protocol-claims.md rule 11: real nodes with
// their meshes and the process executor, of lab-b, which holds its age identity but no grant
// of a sealed bundle's key (home h), and of lab-a, the sealer (home hA), and campaigns of
// lab-a over that bundle.
type sealedMesh struct {
	t          *testing.T
	h, hA      home.Home
	labA, labB *attest.Lab
	ageA, ageB *age.X25519Identity
	trust      *attest.TrustStore
	sealedDir  string
	key        *tasks.DataKey
	network    string
	// tune, when set, edits each node's options and its mesh's before they start.
	tune func(*Options, *mesh.Options)
}

func newSealedMesh(t *testing.T) *sealedMesh {
	f := &sealedMesh{t: t, network: "sealed-mesh-test", trust: attest.NewTrustStore()}
	var err error
	if f.labA, err = attest.InitLab(filepath.Join(t.TempDir(), "lab-a"), "lab-a"); err != nil {
		t.Fatal(err)
	}
	if f.labB, err = attest.InitLab(filepath.Join(t.TempDir(), "lab-b"), "lab-b"); err != nil {
		t.Fatal(err)
	}
	f.ageA, _ = age.GenerateX25519Identity()
	f.ageB, _ = age.GenerateX25519Identity()
	for _, l := range []struct {
		name string
		lab  *attest.Lab
		id   *age.X25519Identity
	}{{"lab-a", f.labA, f.ageA}, {"lab-b", f.labB, f.ageB}} {
		if _, err := f.trust.AddLab(l.name, l.lab.Pub); err != nil {
			t.Fatal(err)
		}
		if err := f.trust.SetAgeRecipient(l.lab.ID, l.id.Recipient().String()); err != nil {
			t.Fatal(err)
		}
	}
	gen := t.TempDir()
	if _, err := exampletasks.Generate(gen); err != nil {
		t.Fatal(err)
	}
	f.sealedDir = filepath.Join(t.TempDir(), "arithmetic")
	if f.key, err = tasks.Seal(filepath.Join(gen, "arithmetic"), f.sealedDir); err != nil {
		t.Fatal(err)
	}
	f.h, f.hA = newHome(t), newHome(t)
	if err := attest.WriteAgeIdentity(f.h.LabAgeKeyPath(), f.ageB); err != nil {
		t.Fatal(err)
	}
	if err := attest.WriteAgeIdentity(f.hA.LabAgeKeyPath(), f.ageA); err != nil {
		t.Fatal(err)
	}
	return f
}

// start starts lab-b's node and mesh on the fixture's home (again, for a restart), leaving
// free sealed slots to key holders for headStart.
func (f *sealedMesh) start(headStart time.Duration) (*Node, *mesh.Mesh) {
	return f.startLab(f.h, "lab-b", f.labB, headStart)
}

// startLab starts a node of lab (named name in its log) on h, with its mesh.
func (f *sealedMesh) startLab(h home.Home, name string, lab *attest.Lab, headStart time.Duration) (*Node, *mesh.Mesh) {
	t := f.t
	cfg := home.DefaultConfig()
	cfg.Network = f.network
	opts := testOptions()
	opts.Config = &cfg
	opts.Logf = testutil.FailureLog(t, name)
	mo := mesh.Options{Trust: f.trust, Capacity: 1,
		Policy:  attest.AcceptPolicy{Replication: 1, AllowProcessRuns: true},
		Scoring: scoring.Options{BootstrapRounds: 20}, SyncInterval: time.Second, HeadsInterval: time.Second,
		Claims: protocol.ClaimConfig{Lease: 30 * time.Second, Settle: 100 * time.Millisecond, KeyHolderHeadStart: headStart}}
	if f.tune != nil {
		f.tune(&opts, &mo)
	}
	n := startNodeAt(t, h, opts)
	cert, err := lab.Certify(n.ID().String(), time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := home.WriteFileAtomic(h.CertPath(), cert.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runner.ForHome(h, map[string]runner.Executor{"process": process.New(process.Options{})}, "process", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r.SelfExe = os.Args[0] // TestMain runs the agent
	mo.Runner = r
	m, err := StartMesh(context.Background(), n, mo)
	if err != nil {
		t.Fatal(err)
	}
	n.setMesh(m)
	t.Cleanup(func() { m.Close() })
	return n, m
}

// publish adds the sealed bundle to n and publishes lab-a's campaign of one slot of it.
func (f *sealedMesh) publish(n *Node, m *mesh.Mesh) (bundle, campaign string) {
	c, err := n.Add(context.Background(), f.sealedDir, AddOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.String(), f.publishCampaign(m, c.String(), 1)
}

// publishCampaign publishes lab-a's campaign of seeds slots of bundle, through m.
func (f *sealedMesh) publishCampaign(m *mesh.Mesh, bundle string, seeds int) string {
	t := f.t
	agent := &agentspec.Spec{Name: "constant", Version: "1.0.0", Command: []string{"evalmesh", "agent", "constant"}}
	env, campaign, err := protocol.SignCampaign(f.labA, &protocol.Campaign{Network: f.network, Title: "sealed slot",
		Tasks: []string{bundle}, Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(agent)}, Seeds: seeds, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.PublishCampaign(env); err != nil {
		t.Fatal(err)
	}
	return campaign
}

// grant gives lab-b the bundle's key, signed by a node of lab-a (the sealer), and stores it
// on n as gossip or sync would bring it.
func (f *sealedMesh) grant(n *Node, bundle string) {
	f.grantTo(n, bundle, f.labB, f.ageB)
}

// grantTo gives lab the bundle's key (to its age identity id), as grant does.
func (f *sealedMesh) grantTo(n *Node, bundle string, lab *attest.Lab, id *age.X25519Identity) {
	t := f.t
	nk, _, _ := crypto.GenerateEd25519Key(nil)
	pid, _ := peer.IDFromPrivateKey(nk)
	certA, err := f.labA.Certify(pid.String(), time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := attest.NewGrant(nk, certA, bundle, lab.ID, id.Recipient().String(), f.key.String(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addLocal(t, n, [][]byte{g})
}

// A sealed slot over the mesh (docs/protocol-claims.md rule 11), on a real node with its
// mesh and the process executor: lab-b's node holds no grant of the bundle's key, so its run
// of the only slot (after the key holders' head start, with nothing else to do) ends
// awaiting the key. It releases the slot without consuming the attempt, does not claim it
// again, and neither does it after a restart; once lab-a grants lab-b the key (an
// attestation-set envelope, as gossip or sync would bring it), the node scores the waiting
// run and publishes it, which finishes the slot with attempt 1.
func TestSealedSlotAwaitsKeyThenScores(t *testing.T) {
	f := newSealedMesh(t)
	h := f.h
	const headStart = 200 * time.Millisecond
	start := func() (*Node, *mesh.Mesh) { return f.start(headStart) }
	n, m := start()
	ctx := context.Background()
	bundle, campaign := f.publish(n, m)

	// awaitingHere waits until the mesh has given the claim machine its capacity and holds
	// nothing, its one run waits for the key and the campaign counts the slot awaiting a key.
	// With capacity 1 and this slot the only one, a machine that would claim it again holds
	// it by then: SetCapacity and RunEnded claim in the same input.
	awaitingHere := func(m *mesh.Mesh, what string) {
		t.Helper()
		testutil.WaitFor(t, 2*time.Minute, what, func() bool {
			var open, idle bool
			open, idle, _ = m.ClaimingIdle(ctx)
			rep, err := m.CampaignStatus(ctx, campaign)
			return err == nil && open && idle && rep.Status.AwaitingKey == 1 && rep.Status.Failed == 0 &&
				len(rep.Slots) == 1 && rep.Slots[0].State == "awaiting-key"
		})
		runs, err := runner.ListRuns(h)
		if err != nil || len(runs) != 1 || runs[0].Phase != runner.PhaseAwaitingKey || runs[0].Attempt != 1 {
			t.Fatalf("%s: runs %+v (%v); want one run of attempt 1 awaiting the key", what, runs, err)
		}
	}
	awaitingHere(m, "the keyless run awaiting the key, the slot released and not claimed again")

	// A restart: the new mesh finds the waiting run in HOME/runs and does not claim its slot.
	m.Close()
	n.Close()
	n, m = start()
	awaitingHere(m, "after a restart, the slot still unclaimed here")
	// ... and tells the others again that its run did not fail: the release that went out
	// before the restart may not have reached anyone. The new node holds no claim, so any
	// release it sends is that one.
	testutil.WaitFor(t, 2*time.Minute, "the restarted node to publish its awaiting-key release again", func() bool {
		return promtest.ToFloat64(n.metrics.claims.WithLabelValues("sent", protocol.ClaimKindRelease)) >= 1
	})

	f.grant(n, bundle)
	testutil.WaitFor(t, 2*time.Minute, "the waiting run scored and published once the grant arrives", func() bool {
		rep, err := m.CampaignStatus(ctx, campaign)
		return err == nil && rep.Status.Done == 1 && rep.Status.AwaitingKey == 0 && len(rep.Slots) == 1 && len(rep.Slots[0].Runs) == 1
	})
	rep, err := m.CampaignStatus(ctx, campaign)
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Slots[0].Runs[0]
	if run.Lab != f.labB.ID || run.Attempt != 1 || !run.Valid || run.Score == nil || rep.Slots[0].State != "done" {
		t.Fatalf("slot %+v, run %+v: want lab-b's valid run of attempt 1", rep.Slots[0], run)
	}
}

// Rule 11's head start, on the same real node: while lab-b cannot open the sealed bundle's
// key it leaves the free slot to key holders (none is online here) and runs nothing; the
// slot report says no-key. Once a grant to lab-b arrives it claims the slot at once, long
// before the head start ends, and its run is scored directly, never waiting for the key.
func TestSealedSlotLeftToKeyHoldersUntilAGrant(t *testing.T) {
	f := newSealedMesh(t)
	n, m := f.start(time.Hour)
	ctx := context.Background()
	bundle, campaign := f.publish(n, m)

	// With capacity 1 and this slot the only one, a machine that would claim it holds it
	// as soon as the mesh gives it its capacity.
	testutil.WaitFor(t, 2*time.Minute, "the campaign known, capacity given and the sealed slot left unclaimed", func() bool {
		var open, idle bool
		open, idle, _ = m.ClaimingIdle(ctx)
		rep, err := m.CampaignStatus(ctx, campaign)
		return err == nil && open && idle && rep.Status.Unclaimed == 1 && len(rep.Slots) == 1 && rep.Slots[0].State == "no-key"
	})
	if runs, err := runner.ListRuns(f.h); err != nil || len(runs) != 0 {
		t.Fatalf("runs %+v (%v); want none while key holders have their head start", runs, err)
	}

	f.grant(n, bundle)
	testutil.WaitFor(t, 2*time.Minute, "the slot claimed, run and scored once the grant arrives", func() bool {
		rep, err := m.CampaignStatus(ctx, campaign)
		return err == nil && rep.Status.Done == 1 && len(rep.Slots) == 1 && len(rep.Slots[0].Runs) == 1
	})
	rep, err := m.CampaignStatus(ctx, campaign)
	if err != nil {
		t.Fatal(err)
	}
	if run := rep.Slots[0].Runs[0]; run.Lab != f.labB.ID || run.Attempt != 1 || !run.Valid || run.Score == nil {
		t.Fatalf("slot %+v, run %+v: want lab-b's valid run of attempt 1", rep.Slots[0], run)
	}
	runs, err := runner.ListRuns(f.h)
	if err != nil || len(runs) != 1 || runs[0].Phase == runner.PhaseAwaitingKey {
		t.Fatalf("runs %+v (%v); want one run, scored here without waiting for a key", runs, err)
	}
}

// Rule 11 across two real nodes on 127.0.0.1: lab-a's node holds the key (its grant to its
// own lab), lab-b's does not. Each has room for one run, and the campaign has two slots of
// the sealed bundle. lab-b's node, which used to claim one of them at once and run it only
// to wait for a key, leaves both to lab-a's, which runs and scores them one after the other.
func TestSealedSlotsLeftToTheKeyHolder(t *testing.T) {
	f := newSealedMesh(t)
	nA, mA := f.startLab(f.hA, "lab-a", f.labA, time.Hour)
	nB, mB := f.start(time.Hour)
	connect(t, nB, nA)
	ctx := context.Background()
	c, err := nA.Add(ctx, f.sealedDir, AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.grantTo(nA, c.String(), f.labA, f.ageA)
	campaign := f.publishCampaign(mA, c.String(), 2)

	testutil.WaitFor(t, 3*time.Minute, "both slots done by lab-a, in both nodes' views", func() bool {
		for _, m := range []*mesh.Mesh{mA, mB} {
			rep, err := m.CampaignStatus(ctx, campaign)
			if err != nil || rep.Status.Done != 2 {
				return false
			}
		}
		return true
	})
	rep, err := mB.CampaignStatus(ctx, campaign)
	if err != nil {
		t.Fatal(err)
	}
	for _, sr := range rep.Slots {
		if len(sr.Runs) != 1 || sr.Runs[0].Lab != f.labA.ID || !sr.Runs[0].Valid {
			t.Fatalf("slot %+v: want one valid run, by lab-a", sr)
		}
	}
	if runs, err := runner.ListRuns(f.h); err != nil || len(runs) != 0 {
		t.Fatalf("lab-b's node ran %+v (%v); want nothing: the key holder had room", runs, err)
	}
}
