package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/taskset"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// ledgerFixture runs real evaluations (process executor, example agents) into a node home
// and trusts that node's key directly.
type ledgerFixture struct {
	dir, home, trust, tasks, specs string
	task                           string // the example task's name
	runs                           []runOutput
	agentOf                        []string
	seedOf                         []int
}

func newLedgerFixture(t *testing.T) *ledgerFixture {
	t.Helper()
	dir := t.TempDir()
	f := &ledgerFixture{dir: dir, home: filepath.Join(dir, "home"), trust: filepath.Join(dir, "trust.yaml"),
		tasks: filepath.Join(dir, "tasks"), specs: filepath.Join(dir, "agents")}
	if _, e, code := runE2(t, "init", "--home", f.home); code != 0 {
		t.Fatalf("init: %s", e)
	}
	if _, err := exampletasks.Generate(f.tasks); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(f.tasks, "arithmetic")
	m, err := tasks.LoadMeta(task)
	if err != nil {
		t.Fatal(err)
	}
	f.task = m.Name
	if err := os.MkdirAll(f.specs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{"solver", "constant"} {
		spec := filepath.Join(f.specs, agent+".yaml")
		if err := os.WriteFile(spec, []byte(fmt.Sprintf("name: %s\nversion: \"1.0.0\"\ncommand: [evalmesh, agent, %s]\n", agent, agent)), 0o644); err != nil {
			t.Fatal(err)
		}
		for seed := 0; seed < 2; seed++ {
			out, e, code := runE2(t, "run", "--home", f.home, "--task", task, "--agent", spec, "--seed", fmt.Sprint(seed), "--executor", "process", "--json", "--self-signed")
			if code != 0 {
				t.Fatalf("run %s seed %d: %s", agent, seed, e)
			}
			var r runOutput
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			f.runs = append(f.runs, r)
			f.agentOf = append(f.agentOf, agent)
			f.seedOf = append(f.seedOf, seed)
		}
	}
	out, e, code := runE2(t, "id", "--home", f.home, "--json")
	if code != 0 {
		t.Fatalf("id: %s", e)
	}
	var id struct {
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal([]byte(out), &id); err != nil {
		t.Fatal(err)
	}
	if _, e, code := runE2(t, "trust", "add", "--trust", f.trust, "--node-key", id.PublicKey, "--name", "the-node"); code != 0 {
		t.Fatalf("trust add: %s", e)
	}
	return f
}

// expected is the ledger scoring computes directly from the runs' own outputs.
func (f *ledgerFixture) expected(t *testing.T, agentName func(i int) string, opts scoring.Options) *scoring.Ledger {
	t.Helper()
	infos, err := taskset.Infos(f.tasks)
	if err != nil {
		t.Fatal(err)
	}
	var results []scoring.Result
	for i, r := range f.runs {
		res := scoring.Result{Task: f.task, Agent: agentName(i), Seed: f.seedOf[i], Score: r.Score, AttestationID: r.AttestationID, Status: scoring.StatusSuccess}
		if !r.Valid {
			res.Status, res.Score = r.InvalidReason, nil
		}
		results = append(results, res)
	}
	l, err := scoring.ComputeLedger(results, infos, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type ledgerJSON struct {
	Root   string `json:"ledger_root"`
	Agents []struct {
		Agent string `json:"agent"`
	} `json:"agents"`
	Attestations struct {
		Read    int `json:"read"`
		Counted int `json:"counted"`
		Refused []struct {
			File   string `json:"file"`
			Reason string `json:"reason"`
		} `json:"refused"`
		Excluded []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"excluded"`
	} `json:"attestations"`
}

func TestLedgerCommand(t *testing.T) {
	f := newLedgerFixture(t)
	attDir := filepath.Join(f.home, "attestations")

	// A tampered copy of the solver's first attestation: its score raised inside the signed
	// payload. It must be refused by name, and the original still count.
	orig, err := os.ReadFile(f.runs[1].Attestation)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(orig, &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(payload), `"seed":1`, `"seed":7`, 1)
	if forged == string(payload) {
		t.Fatalf("payload has no seed 1 to forge: %s", payload)
	}
	env["payload"] = base64.StdEncoding.EncodeToString([]byte(forged))
	tampered, _ := json.Marshal(env)
	if err := os.WriteFile(filepath.Join(attDir, "tampered.json"), tampered, 0o644); err != nil {
		t.Fatal(err)
	}

	opts := scoring.Options{Worst: "population", BootstrapRounds: 20}
	byName := func(i int) string { return f.agentOf[i] }

	t.Run("json, agents named by spec", func(t *testing.T) {
		out, e, code := runE2(t, "ledger", "--allow-process-runs", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks,
			"--agents", f.specs, "--bootstrap-rounds", "20", "--json")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		var got ledgerJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := f.expected(t, byName, opts)
		if got.Root != want.Root() {
			t.Errorf("ledger root %s, want %s (scoring.ComputeLedger on the same results)", got.Root, want.Root())
		}
		a := got.Attestations
		if a.Read != 5 || a.Counted != 4 || len(a.Refused) != 1 || len(a.Excluded) != 0 {
			t.Errorf("attestations %+v: want 5 read, 4 counted, 1 refused, 0 excluded", a)
		}
		if len(a.Refused) == 1 && (filepath.Base(a.Refused[0].File) != "tampered.json" || a.Refused[0].Reason != "bad signature") {
			t.Errorf("refused %+v, want tampered.json for a bad signature", a.Refused[0])
		}
		var names []string
		for _, ag := range got.Agents {
			names = append(names, ag.Agent)
		}
		if strings.Join(names, ",") != "sota,solver,constant" && strings.Join(names, ",") != "solver,sota,constant" {
			t.Errorf("agents %v, want sota, solver and constant, constant last", names)
		}
	})

	t.Run("text names the refused file", func(t *testing.T) {
		out, e, code := runE2(t, "ledger", "--allow-process-runs", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks,
			"--agents", f.specs, "--bootstrap-rounds", "20")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		want := f.expected(t, byName, opts)
		for _, s := range []string{"solver", "constant", "ledger root " + want.Root(), "5 read, 1 refused, 0 excluded, 4 counted"} {
			if !strings.Contains(out, s) {
				t.Errorf("stdout lacks %q:\n%s", s, out)
			}
		}
		if !strings.Contains(e, "refused "+filepath.Join(attDir, "tampered.json")+": bad signature") {
			t.Errorf("stderr does not name the tampered file:\n%s", e)
		}
	})

	t.Run("without --agents, agents are their CIDs", func(t *testing.T) {
		out, e, code := runE2(t, "ledger", "--allow-process-runs", "--trust", f.trust, "--tasks", f.tasks, "--attestations", attDir,
			"--bootstrap-rounds", "20", "--json")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		var got ledgerJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		cids := map[string]string{}
		for _, ag := range []string{"solver", "constant"} {
			names, err := agentNames([]string{filepath.Join(f.specs, ag+".yaml")})
			if err != nil {
				t.Fatal(err)
			}
			for cid := range names {
				cids[ag] = cid
			}
		}
		want := f.expected(t, func(i int) string { return cids[f.agentOf[i]] }, opts)
		if got.Root != want.Root() {
			t.Errorf("ledger root %s, want %s", got.Root, want.Root())
		}
	})

	t.Run("without --allow-process-runs, process-executor runs do not count", func(t *testing.T) {
		out, e, code := runE2(t, "ledger", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks,
			"--bootstrap-rounds", "20", "--json")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		var got ledgerJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Attestations.Counted != 0 || len(got.Attestations.Excluded) != 4 {
			t.Fatalf("attestations %+v: want 0 counted, 4 excluded", got.Attestations)
		}
		for _, x := range got.Attestations.Excluded {
			if x.Reason != "not isolated" {
				t.Errorf("excluded %s for %q, want not isolated", x.ID, x.Reason)
			}
		}
		if strings.Contains(e, "counts process-executor runs") {
			t.Errorf("stderr claims process runs count:\n%s", e)
		}
	})

	t.Run("--allow-process-runs says so", func(t *testing.T) {
		_, e, code := runE2(t, "ledger", "--allow-process-runs", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks, "--bootstrap-rounds", "20")
		if code != 0 || !strings.Contains(e, "this network counts process-executor runs") {
			t.Fatalf("ledger --allow-process-runs: %d, stderr does not say it counts process runs:\n%s", code, e)
		}
	})

	t.Run("replication 1 with no re-scores counts nothing", func(t *testing.T) {
		out, e, code := runE2(t, "ledger", "--allow-process-runs", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks,
			"--replication", "1", "--bootstrap-rounds", "20", "--json")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		var got ledgerJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Attestations.Counted != 0 || len(got.Attestations.Excluded) != 4 {
			t.Fatalf("attestations %+v: want 0 counted, 4 excluded", got.Attestations)
		}
		for _, x := range got.Attestations.Excluded {
			if x.Reason != "too few replicators" {
				t.Errorf("excluded %s for %q, want too few replicators", x.ID, x.Reason)
			}
		}
	})

	t.Run("a task folder without the runs' bundle excludes them", func(t *testing.T) {
		other := filepath.Join(f.dir, "other-tasks")
		if err := os.MkdirAll(other, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(f.tasks, "sentiment"), filepath.Join(other, "sentiment")); err != nil {
			t.Fatal(err)
		}
		out, e, code := runE2(t, "ledger", "--allow-process-runs", "--home", f.home, "--trust", f.trust, "--tasks", other, "--bootstrap-rounds", "20", "--json")
		if code != 0 {
			t.Fatalf("ledger: %d %s", code, e)
		}
		var got ledgerJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Attestations.Counted != 0 || len(got.Attestations.Excluded) != 4 || got.Attestations.Excluded[0].Reason != "unknown task bundle" {
			t.Fatalf("attestations %+v: want the 4 runs excluded as an unknown task bundle", got.Attestations)
		}
	})
}

func TestLedgerCommandErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := exampletasks.Generate(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(dir, "trust.yaml")
	if err := os.WriteFile(trust, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := filepath.Join(dir, "home")
	if _, err := home.Resolve(h); err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(dir, "dup")
	os.MkdirAll(dup, 0o755)
	os.WriteFile(filepath.Join(dup, "a.yaml"), []byte("name: x\nversion: \"1\"\ncommand: [a]\n"), 0o644)
	os.WriteFile(filepath.Join(dup, "b.yaml"), []byte("name: x\nversion: \"1\"\ncommand: [b]\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no trust", []string{"ledger", "--tasks", dir}, "--tasks DIR and one of --trust TRUST.yaml or --network-doc FILE are required"},
		{"missing folder", []string{"ledger", "--trust", trust, "--tasks", filepath.Join(dir, "tasks"), "--attestations", filepath.Join(dir, "nope")}, "does not exist"},
		{"negative replication", []string{"ledger", "--trust", trust, "--tasks", dir, "--replication", "-1"}, "--replication -1"},
		{"same agent name twice", []string{"ledger", "--trust", trust, "--tasks", filepath.Join(dir, "tasks"), "--attestations", dir, "--agents", dup}, "both called x@1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e, code := runE2(t, append(c.args, "--home", h)...)
			if code == 0 || !strings.Contains(e, c.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, e, c.want)
			}
		})
	}
}

func TestLedgerHelp(t *testing.T) {
	out, _, code := runE2(t, "ledger", "--help")
	if code != 0 || !strings.Contains(out, "evalmesh ledger --trust trust.yaml --tasks bundles/") {
		t.Fatalf("help (%d) lacks an example:\n%s", code, out)
	}
}

// The network document's ledger.elo_bootstrap reaches `ledger --network-doc` (the root is
// the one scoring computes with that policy, not the default's), and --elo-bootstrap beside
// --network-doc is refused as the document's other options are. The fixture's runs are
// signed by a self-signed node, trusted by the trust file, which --trust supplies in place
// of the document's labs.
func TestLedgerNetworkDocEloBootstrap(t *testing.T) {
	f := newLedgerFixture(t)
	doc := filepath.Join(f.dir, "network.json")
	body := `{"version":1,"network":"airs","labs":[],` +
		`"ledger":{"bootstrap_rounds":20,"executors":["container","process"],"elo_bootstrap":"tasks-linearised"}}`
	if err := os.WriteFile(doc, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	byName := func(i int) string { return f.agentOf[i] }
	out, e, code := runE2(t, "ledger", "--home", f.home, "--trust", f.trust, "--network-doc", doc, "--tasks", f.tasks, "--agents", f.specs, "--json")
	if code != 0 {
		t.Fatalf("ledger --network-doc: %d %s", code, e)
	}
	var got ledgerJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := f.expected(t, byName, scoring.Options{Worst: "population", BootstrapRounds: 20, EloBootstrap: scoring.EloBootstrapTasksLinearised})
	def := f.expected(t, byName, scoring.Options{Worst: "population", BootstrapRounds: 20})
	if got.Root != want.Root() || got.Root == def.Root() || got.Attestations.Counted != 4 {
		t.Fatalf("root %s, want %s (tasks-linearised; the default's is %s); %d counted, want 4", got.Root, want.Root(), def.Root(), got.Attestations.Counted)
	}
	if !strings.Contains(out, `"elo_bootstrap": "tasks-linearised"`) {
		t.Fatalf("the ledger's policy does not name the Elo bootstrap:\n%s", out)
	}
	_, e, code = runE2(t, "ledger", "--home", f.home, "--trust", f.trust, "--network-doc", doc, "--tasks", f.tasks, "--elo-bootstrap", "games")
	if code == 0 || !strings.Contains(e, "--elo-bootstrap and --network-doc") {
		t.Fatalf("--elo-bootstrap beside --network-doc: exit %d, %s", code, e)
	}
}
