package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/tasks"
)

const campaignTestTask = "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi"

// campaignFlow is a lab, a trust file listing it, and an agent spec file.
type campaignFlow struct {
	dir, lab, trust, agent string
}

func newCampaignFlow(t *testing.T) *campaignFlow {
	t.Helper()
	d := t.TempDir()
	f := &campaignFlow{dir: d, lab: filepath.Join(d, "lab"), trust: filepath.Join(d, "trust.yaml"), agent: filepath.Join(d, "echo.yaml")}
	mustCLI(t, "lab", "init", "--dir", f.lab, "--name", "acme")
	mustCLI(t, "trust", "add", "--trust", f.trust, "--lab", f.lab)
	if err := os.WriteFile(f.agent, []byte("name: echo\nversion: 1.0.0\ncommand: [evalmesh, agent, echo]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *campaignFlow) create(t *testing.T, extra ...string) (path, stderr string) {
	t.Helper()
	args := append([]string{"--home", filepath.Join(f.dir, "home"), "campaign", "create", "--lab", f.lab, "--title", "SVAMP sweep",
		"--task", campaignTestTask, "--agent", f.agent, "--seeds", "3", "--replication", "1"}, extra...)
	code, out, errs := cliRun(t, args...)
	if code != 0 {
		t.Fatalf("campaign create: exit %d: %s", code, errs)
	}
	path = filepath.Join(f.dir, "campaign.json")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, errs
}

func TestCampaignCreateVerifyCLI(t *testing.T) {
	f := newCampaignFlow(t)
	path, errs := f.create(t, "--network", "acme-net", "--deadline", "3d")
	if !strings.Contains(errs, "3 slots") || !strings.Contains(errs, "network acme-net") {
		t.Fatalf("create stderr %q", errs)
	}
	out := mustCLI(t, "campaign", "verify", "--trust", f.trust, path, "--json")
	var v campaignVerifyOutput
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	spec, err := agentspec.Load(f.agent)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || v.Slots != 3 || v.LabName != "acme" || v.Network != "acme-net" || len(v.Agents) != 1 || v.Agents[0].CID != spec.CID() ||
		v.Agents[0].Name != "echo" || len(v.Tasks) != 1 || v.Tasks[0] != campaignTestTask {
		t.Fatalf("verify output %+v", v)
	}
	if got := v.Deadline.Sub(*v.Created); got != 72*time.Hour {
		t.Fatalf("deadline %s after created, want 72h", got)
	}
	if !strings.Contains(errs, "campaign "+v.ID+":") {
		t.Fatalf("create printed %q, verify says ID %s", errs, v.ID)
	}
	text := mustCLI(t, "campaign", "verify", "--trust", f.trust, path)
	if !strings.HasPrefix(text, "ok "+v.ID) || !strings.Contains(text, "= 3 slots") {
		t.Fatalf("text output %q", text)
	}
	// The default network is the home config's.
	path2, _ := f.create(t)
	out = mustCLI(t, "campaign", "verify", "--trust", f.trust, path2, "--json")
	json.Unmarshal([]byte(out), &v)
	if v.Network != "evalmesh-dev" {
		t.Fatalf("default network %q", v.Network)
	}
}

func TestCampaignVerifyCLIRefusals(t *testing.T) {
	f := newCampaignFlow(t)
	path, _ := f.create(t, "--deadline", "1h")
	other := filepath.Join(f.dir, "other-trust.yaml")
	mustCLI(t, "lab", "init", "--dir", filepath.Join(f.dir, "lab2"))
	mustCLI(t, "trust", "add", "--trust", other, "--lab", filepath.Join(f.dir, "lab2"))
	tampered := filepath.Join(f.dir, "tampered.json")
	b, _ := os.ReadFile(path)
	os.WriteFile(tampered, []byte(strings.Replace(string(b), `"sig":"`, `"sig":"AAAA`, 1)), 0o644)
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"unknown lab", []string{"--trust", other, path}, "unknown_lab"},
		{"bad signature", []string{"--trust", f.trust, tampered}, "bad_signature"},
		{"expired", []string{"--trust", f.trust, "--at", later, path}, "expired"},
		{"too many slots", []string{"--trust", f.trust, "--max-slots", "2", path}, "too_many_slots"},
		{"wrong network", []string{"--trust", f.trust, "--network", "elsewhere", path}, "wrong_network"},
	} {
		args := append([]string{"campaign", "verify", "--json"}, tc.args...)
		code, out, errs := cliRun(t, args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (%s)", tc.name, code, errs)
			continue
		}
		var v campaignVerifyOutput
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.OK || v.Reason != tc.reason {
			t.Errorf("%s: output %s (%v), want reason %s", tc.name, out, err, tc.reason)
		}
		if !strings.Contains(errs, strings.ReplaceAll(tc.reason, "_", " ")) {
			t.Errorf("%s: stderr %q does not name the reason", tc.name, errs)
		}
		if v.Tasks == nil || v.Agents == nil {
			t.Errorf("%s: lists are null, want []", tc.name)
		}
	}
}

func TestCampaignCreateFromBundleFolder(t *testing.T) {
	f := newCampaignFlow(t)
	bundle := filepath.Join(t.TempDir(), "svamp")
	src, data := svampSource(t, "# SVAMP\n")
	mustCLI(t, "task", "import", src, "--data", data, "--out", bundle)
	want, err := tasks.Pack(context.Background(), bundle, tasks.NewHashOnlyDAG(), tasks.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	_, n, err := runCampaignCreate(context.Background(), campaignCreateOptions{LabDir: f.lab, Title: "t", Tasks: []string{bundle, campaignTestTask},
		Agents: []string{f.agent}, Seeds: 2, Deadline: time.Hour, Network: "n", Now: time.Now()}, &sb)
	if err != nil || n != 4 {
		t.Fatalf("create: %d slots, %v", n, err)
	}
	v, err := runCampaignVerify(campaignVerifyOptions{TrustPath: f.trust, Path: writeCampaignTemp(t, sb.String()), Now: time.Now()})
	if err != nil || v.Tasks[0] != want.String() {
		t.Fatalf("tasks %v, want %s first (%v)", v.Tasks, want, err)
	}
	// A folder that is not a bundle, or an argument that is neither, is refused by name.
	if _, _, err := runCampaignCreate(context.Background(), campaignCreateOptions{LabDir: f.lab, Title: "t", Tasks: []string{svampFixture},
		Agents: []string{f.agent}, Seeds: 1, Deadline: time.Hour, Network: "n", Now: time.Now()}, &sb); err == nil || !strings.Contains(err.Error(), svampFixture) {
		t.Fatalf("non-bundle folder: %v", err)
	}
	if _, _, err := runCampaignCreate(context.Background(), campaignCreateOptions{LabDir: f.lab, Title: "t", Tasks: []string{"nope"},
		Agents: []string{f.agent}, Seeds: 1, Deadline: time.Hour, Network: "n", Now: time.Now()}, &sb); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("bad task: %v", err)
	}
}

func writeCampaignTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
