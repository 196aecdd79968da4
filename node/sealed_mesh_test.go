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

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// A sealed slot over the mesh (docs/protocol-claims.md rule 11), on a real node with its
// mesh and the process executor: lab-b's node holds no grant of the bundle's key, so its run
// of the only slot ends awaiting the key. It releases the slot without consuming the attempt,
// does not claim it again, and neither does it after a restart; once lab-a grants lab-b the
// key (an attestation-set envelope, as gossip or sync would bring it), the node scores the
// waiting run and publishes it, which finishes the slot with attempt 1.
func TestSealedSlotAwaitsKeyThenScores(t *testing.T) {
	const network = "sealed-mesh-test"
	trust := attest.NewTrustStore()
	labA, err := attest.InitLab(filepath.Join(t.TempDir(), "lab-a"), "lab-a")
	if err != nil {
		t.Fatal(err)
	}
	labB, err := attest.InitLab(filepath.Join(t.TempDir(), "lab-b"), "lab-b")
	if err != nil {
		t.Fatal(err)
	}
	ageA, _ := age.GenerateX25519Identity()
	ageB, _ := age.GenerateX25519Identity()
	for _, l := range []struct {
		name string
		lab  *attest.Lab
		id   *age.X25519Identity
	}{{"lab-a", labA, ageA}, {"lab-b", labB, ageB}} {
		if _, err := trust.AddLab(l.name, l.lab.Pub); err != nil {
			t.Fatal(err)
		}
		if err := trust.SetAgeRecipient(l.lab.ID, l.id.Recipient().String()); err != nil {
			t.Fatal(err)
		}
	}

	gen := t.TempDir()
	if _, err := exampletasks.Generate(gen); err != nil {
		t.Fatal(err)
	}
	sealed := filepath.Join(t.TempDir(), "arithmetic")
	key, err := tasks.Seal(filepath.Join(gen, "arithmetic"), sealed)
	if err != nil {
		t.Fatal(err)
	}

	h := newHome(t)
	if err := attest.WriteAgeIdentity(attest.NodeLabAgeKeyPath(h), ageB); err != nil {
		t.Fatal(err)
	}
	start := func() (*Node, *Mesh) {
		cfg := home.DefaultConfig()
		cfg.Network = network
		opts := testOptions()
		opts.Config = &cfg
		opts.Logf = testutil.FailureLog(t, "lab-b")
		n := startNodeAt(t, h, opts)
		cert, err := labB.Certify(n.ID().String(), time.Now().Add(-time.Minute), time.Hour)
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
		m, err := StartMesh(context.Background(), n, MeshOptions{Trust: trust, Runner: r, Capacity: 1,
			Policy:  attest.AcceptPolicy{Replication: 1, AllowProcessRuns: true},
			Scoring: scoring.Options{BootstrapRounds: 20}, SyncInterval: time.Second, HeadsInterval: time.Second,
			Claims: protocol.ClaimConfig{Lease: 30 * time.Second, Settle: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		n.setMesh(m)
		t.Cleanup(func() { m.Close() })
		return n, m
	}
	n, m := start()
	ctx := context.Background()
	bundle, err := n.Add(ctx, sealed, AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent := &runner.AgentSpec{Name: "constant", Version: "1.0.0", Command: []string{"evalmesh", "agent", "constant"}}
	env, campaign, err := protocol.SignCampaign(labA, &protocol.Campaign{Network: network, Title: "sealed slot",
		Tasks: []string{bundle.String()}, Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(agent)}, Seeds: 1, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.PublishCampaign(env); err != nil {
		t.Fatal(err)
	}

	// awaitingHere waits until the mesh has given the claim machine its capacity and holds
	// nothing, its one run waits for the key and the campaign counts the slot awaiting a key.
	// With capacity 1 and this slot the only one, a machine that would claim it again holds
	// it by then: SetCapacity and RunEnded claim in the same input.
	awaitingHere := func(m *Mesh, what string) {
		t.Helper()
		testutil.WaitFor(t, 2*time.Minute, what, func() bool {
			var open, idle bool
			_ = m.query(ctx, func() { open, idle = m.capOpen, len(m.cm.Held()) == 0 && len(m.running) == 0 })
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

	// lab-a (the sealer, from a node of its own) grants lab-b the key.
	nk, _, _ := crypto.GenerateEd25519Key(nil)
	pid, _ := peer.IDFromPrivateKey(nk)
	certA, err := labA.Certify(pid.String(), time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	grant, _, err := attest.NewGrant(nk, certA, bundle.String(), labB.ID, ageB.Recipient().String(), key.String(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addLocal(t, n, [][]byte{grant})
	testutil.WaitFor(t, 2*time.Minute, "the waiting run scored and published once the grant arrives", func() bool {
		rep, err := m.CampaignStatus(ctx, campaign)
		return err == nil && rep.Status.Done == 1 && rep.Status.AwaitingKey == 0 && len(rep.Slots) == 1 && len(rep.Slots[0].Runs) == 1
	})
	rep, err := m.CampaignStatus(ctx, campaign)
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Slots[0].Runs[0]
	if run.Lab != labB.ID || run.Attempt != 1 || !run.Valid || run.Score == nil || rep.Slots[0].State != "done" {
		t.Fatalf("slot %+v, run %+v: want lab-b's valid run of attempt 1", rep.Slots[0], run)
	}
}
