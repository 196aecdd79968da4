package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/tasks"
)

func cli(t *testing.T, hdir string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"--home", hdir}, args...), &out, &errb); code != 0 {
		t.Fatalf("evalmesh %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// labHome makes a lab (with its age identity) and a home whose node it certifies, holding
// the lab's age identity; trust lists the lab with its recipient.
func labHome(t *testing.T, name, trust string) (labDir, hdir string) {
	t.Helper()
	labDir = filepath.Join(t.TempDir(), name)
	hdir = filepath.Join(t.TempDir(), "home-"+name)
	cli(t, hdir, "lab", "init", "--dir", labDir, "--name", name)
	h := home.Home{Dir: hdir}
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	pid, _ := h.PeerID()
	cli(t, hdir, "lab", "certify", "--dir", labDir, "--node", pid.String(), "--out", h.CertPath())
	id, err := os.ReadFile(filepath.Join(labDir, attest.LabAgeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(h.LabAgeKeyPath(), id, 0o600)
	cli(t, hdir, "trust", "add", "--trust", trust, "--lab", labDir)
	return labDir, hdir
}

// TestTaskSealGrantInspect: pack seals by default once the trust file lists recipients,
// granting the key to the labs listed; inspect says sealed and to whom; a lab added later
// is granted the key by `task grant` and the CID stays the same.
func TestTaskSealGrantInspect(t *testing.T) {
	trust := filepath.Join(t.TempDir(), "trust.yaml")
	_, alpha := labHome(t, "alpha", trust)
	copyTrust := func(hdir string) {
		b, _ := os.ReadFile(trust)
		os.WriteFile(filepath.Join(hdir, "trust.yaml"), b, 0o644)
	}
	copyTrust(alpha)

	src := filepath.Join(t.TempDir(), "arith")
	if err := tasks.CopyTree(exampleTaskDir(t, "arithmetic"), src); err != nil {
		t.Fatal(err)
	}
	var packed struct {
		CID       string   `json:"cid"`
		Sealed    bool     `json:"sealed"`
		Dir       string   `json:"dir"`
		GrantedTo []string `json:"granted_to"`
	}
	if err := json.Unmarshal([]byte(cli(t, alpha, "task", "pack", src, "--json")), &packed); err != nil {
		t.Fatal(err)
	}
	if !packed.Sealed || packed.Dir != src+".sealed" || strings.Join(packed.GrantedTo, ",") != "alpha" {
		t.Fatalf("pack by default: %+v", packed)
	}
	if _, err := os.Stat(filepath.Join(packed.Dir, "private")); !os.IsNotExist(err) {
		t.Fatalf("sealed copy has private/: %v", err)
	}
	inspect := func(hdir string) (sealed bool, to []string) {
		var info struct {
			Sealed    bool     `json:"sealed"`
			CID       string   `json:"cid"`
			GrantedTo []string `json:"granted_to"`
		}
		if err := json.Unmarshal([]byte(cli(t, hdir, "task", "inspect", packed.Dir, "--json")), &info); err != nil {
			t.Fatal(err)
		}
		if info.CID != packed.CID {
			t.Fatalf("inspect CID %s, packed %s", info.CID, packed.CID)
		}
		return info.Sealed, info.GrantedTo
	}
	if s, to := inspect(alpha); !s || strings.Join(to, ",") != "alpha" {
		t.Fatalf("inspect: sealed %v granted to %v", s, to)
	}
	// --seal=false packs in the clear.
	if out := cli(t, alpha, "task", "pack", src, "--seal=false"); strings.TrimSpace(out) == packed.CID {
		t.Fatal("--seal=false gave the sealed CID")
	}

	// Beta joins: alpha grants it the key; the CID is unchanged.
	_, beta := labHome(t, "beta", trust)
	copyTrust(alpha)
	copyTrust(beta)
	out := cli(t, alpha, "task", "grant", packed.CID, "--lab", "beta")
	if !strings.Contains(out, "granted "+packed.CID+" to beta") {
		t.Fatalf("grant: %s", out)
	}
	if s, to := inspect(alpha); !s || strings.Join(to, ",") != "alpha,beta" {
		t.Fatalf("after the grant: sealed %v granted to %v", s, to)
	}
	if again := strings.TrimSpace(cli(t, alpha, "task", "pack", packed.Dir)); again != packed.CID {
		t.Fatalf("CID after a lab was added: %s, was %s", again, packed.CID)
	}
	// Beta holds no grant in its own home yet, so it cannot grant onwards.
	var errb bytes.Buffer
	if code := run([]string{"--home", beta, "task", "grant", packed.CID, "--lab", "alpha"}, &bytes.Buffer{}, &errb); code == 0 || !strings.Contains(errb.String(), "holds no grant") {
		t.Fatalf("grant without the key: exit %d: %s", code, errb.String())
	}
}

func exampleTaskDir(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := exampletasks.Generate(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// TestTaskSealScorers: with --scorers, sealing grants the key to the scoring labs only and
// prints the ledger.scorers entry; it refuses scorers that leave out the sealing lab or name
// every lab. Once the network document names the scorers, `task grant` refuses a lab that
// runs the task, naming the rule, and grants a scoring lab.
func TestTaskSealScorers(t *testing.T) {
	trust := filepath.Join(t.TempDir(), "trust.yaml")
	_, alpha := labHome(t, "alpha", trust)
	labHome(t, "beta", trust)
	labHome(t, "gamma", trust)
	b, _ := os.ReadFile(trust)
	os.WriteFile(filepath.Join(alpha, "trust.yaml"), b, 0o644)
	src := filepath.Join(t.TempDir(), "arith")
	if err := tasks.CopyTree(exampleTaskDir(t, "arithmetic"), src); err != nil {
		t.Fatal(err)
	}
	fails := func(want string, args ...string) {
		t.Helper()
		var errb bytes.Buffer
		if code := run(append([]string{"--home", alpha}, args...), &bytes.Buffer{}, &errb); code == 0 || !strings.Contains(errb.String(), want) {
			t.Fatalf("evalmesh %s: exit %d, %q; want an error saying %q", strings.Join(args, " "), code, errb.String(), want)
		}
	}
	fails("leaves out this node's lab", "task", "pack", src, "--seal", "--scorers", "beta,gamma", "--out", src+".x")
	fails("names every lab", "task", "pack", src, "--seal", "--scorers", "alpha,beta,gamma", "--out", src+".y")
	var packed struct {
		CID          string   `json:"cid"`
		GrantedTo    []string `json:"granted_to"`
		Scorers      []string `json:"scorers"`
		ScorersEntry string   `json:"scorers_entry"`
	}
	if err := json.Unmarshal([]byte(cli(t, alpha, "task", "pack", src, "--seal", "--scorers", "alpha,beta", "--json")), &packed); err != nil {
		t.Fatal(err)
	}
	slices.Sort(packed.GrantedTo)
	if strings.Join(packed.GrantedTo, ",") != "alpha,beta" || strings.Join(packed.Scorers, ",") != "alpha,beta" || !strings.Contains(packed.ScorersEntry, packed.CID) {
		t.Fatalf("sealed for scorers: %+v", packed)
	}

	// The network document names the scorers of the sealed bundle.
	ts, err := attest.LoadTrust(trust)
	if err != nil {
		t.Fatal(err)
	}
	h := home.Home{Dir: alpha}
	cfg, err := h.Config()
	if err != nil {
		t.Fatal(err)
	}
	doc := protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: cfg.Network,
		Ledger: protocol.LedgerPolicy{Scorers: map[string][]string{packed.CID: {"alpha", "beta"}}}}
	for _, l := range ts.Labs() {
		doc.Labs = append(doc.Labs, protocol.NetworkLab{Name: l.Name, Key: l.Key, AgeRecipient: l.AgeRecipient})
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.NetworkDocPath(), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	fails("ledger.scorers names alpha, beta as the labs that score", "task", "grant", packed.CID, "--lab", "gamma")
	if out := cli(t, alpha, "task", "grant", packed.CID, "--lab", "beta"); !strings.Contains(out, "granted "+packed.CID+" to beta") {
		t.Fatalf("grant to a scoring lab: %s", out)
	}
}
