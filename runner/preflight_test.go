package runner_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
)

// A run whose attestation would be refused is refused before anything runs: no run folder,
// no agent. Today's main ran the agent and failed at signing (another node's certificate),
// signed an attestation nobody accepts (expired), or signed silently without a certificate.
func TestRunRefusedBeforeTheAgentStarts(t *testing.T) {
	labKey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := attest.NewLab(labKey)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, _ := crypto.GenerateEd25519Key(nil)
	other, _ := peer.IDFromPrivateKey(otherKey)
	now := time.Now()
	task := exampleTask(t, "arithmetic") // wall_clock_seconds: 120
	for _, tt := range []struct {
		name       string
		cert       func(node string) *attest.NodeCert
		selfSigned bool
		want       string
	}{
		{"certificate for another node", func(string) *attest.NodeCert {
			return mustCertify(t, lab, other.String(), now.Add(-time.Hour), 48*time.Hour)
		}, false, "is for node " + other.String()},
		{"expired certificate", func(n string) *attest.NodeCert { return mustCertify(t, lab, n, now.Add(-48*time.Hour), 24*time.Hour) }, false, "expired"},
		{"certificate expiring before the wall-clock limit", func(n string) *attest.NodeCert {
			return mustCertify(t, lab, n, now.Add(-time.Hour), time.Hour+30*time.Second)
		}, false, "wall-clock limit"},
		{"no certificate", func(string) *attest.NodeCert { return nil }, false, "--self-signed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHome(t)
			r := processRunner(t, h, nil)
			node, _ := h.PeerID()
			r.Cert, r.SelfSigned = tt.cert(node.String()), tt.selfSigned
			if r.Cert != nil {
				r.Lab = r.Cert.Lab
			}
			agent := exampleAgent("solver")
			_, err := r.Run(bg, runner.Request{TaskDir: task, Agent: agent})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want a refusal saying %q", err, tt.want)
			}
			if tt.cert(node.String()) == nil && !errors.Is(err, runner.ErrUncertified) {
				t.Fatalf("Run without a certificate: %v, want ErrUncertified", err)
			}
			if runs, _ := runner.ListRuns(h); len(runs) != 0 {
				t.Fatalf("a refused run left %d run(s) behind (phase %s): the agent was started", len(runs), runs[0].Phase)
			}
			if _, err := os.Stat(h.AttestationsDir()); err == nil {
				t.Fatal("a refused run wrote an attestation")
			}
		})
	}
	t.Run("valid certificate", func(t *testing.T) {
		h := newHome(t)
		r := processRunner(t, h, nil)
		node, _ := h.PeerID()
		r.Cert, r.SelfSigned = mustCertify(t, lab, node.String(), now.Add(-time.Hour), 48*time.Hour), false
		r.Lab = r.Cert.Lab
		trust := attest.NewTrustStore()
		if _, err := trust.AddLab("acme", lab.Pub); err != nil {
			t.Fatal(err)
		}
		r.Trust = trust
		o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("solver")})
		if err != nil || !o.Valid {
			t.Fatalf("Run with a good certificate: %v %+v", err, o)
		}
		if _, err := attest.Verify(o.Envelope, trust, time.Now()); err != nil {
			t.Fatalf("its attestation does not verify: %v", err)
		}
	})
}

// Running a slot again is a new attempt of this node's, never a second attestation of the
// same attempt (which peers read as equivocation); other slots start at 1.
func TestRunAgainIsANewAttempt(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	task := exampleTask(t, "arithmetic")
	var got []int
	for _, seed := range []int{0, 0, 1, 0} {
		o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("solver"), Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o.Predicate.Attempt)
	}
	if want := []int{1, 2, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("attempts %v, want %v", got, want)
	}
	// A home that keeps only the attestations (runs/ cleaned up) still counts them.
	if err := os.RemoveAll(h.RunsDir()); err != nil {
		t.Fatal(err)
	}
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("solver"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if o.Predicate.Attempt != 2 {
		t.Fatalf("attempt %d after runs/ was removed, want 2 (from HOME/attestations)", o.Predicate.Attempt)
	}
}

func mustCertify(t *testing.T, lab *attest.Lab, node string, from time.Time, d time.Duration) *attest.NodeCert {
	t.Helper()
	c, err := lab.Certify(node, from, d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
