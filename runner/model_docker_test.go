package runner_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents/standin"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// podImage builds (once per engine: the tag is the content hash) a FROM scratch image
// holding the ReAct example agent at /agent, the stand-in model server (a test double) at
// /model and the executor test agent at /testagent, and returns its image ID.
func podImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	test, err := os.ReadFile(executortest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	return executortest.GoImage(t, cli, "evalmesh-example-pod", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/react"}, {Name: "model", Package: "./examples/agents/cmd/standin-model"}},
		map[string][]byte{"testagent": test})
}

// standinModel is the model part of a spec serving the stand-in on port 8000.
func standinModel(img string, extra ...string) *agentspec.Model {
	return &agentspec.Model{
		Name: "standin", Image: img, Port: 8000, ReadyPath: "/health",
		Command: append([]string{"/model", "serve", "--addr", "127.0.0.1:8000", "--model", "standin"}, extra...),
		Probe:   []string{"/model", "probe"}, ReadyTimeoutSeconds: 30,
	}
}

func podRunner(t *testing.T) (*runner.Runner, *docker.Executor, string) {
	t.Helper()
	r, cli := dockerRunner(t)
	img := podImage(t, cli)
	r.Models = runner.ModelPolicy{Images: []string{img}}
	return r, r.Executors["docker"].(*docker.Executor), img
}

// runContainers lists the engine's evalmesh containers of one run.
func runContainers(t *testing.T, ex *docker.Executor, runID string) []docker.Container {
	t.Helper()
	cs, err := ex.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	var out []docker.Container
	for _, c := range cs {
		if strings.HasPrefix(c.TaskID, runID) {
			out = append(out, c)
		}
	}
	return out
}

// weightsFolder makes a small weight folder, lists it in r's policy as "tiny" and returns
// its digest.
func weightsFolder(t *testing.T, r *runner.Runner) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), []byte("not really weights\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := runner.WeightsDigest(bg, dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Models.Weights = map[string]string{"tiny": dir}
	return d
}

func TestModelPodReActAgentScores(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img)
	digest := weightsFolder(t, r)
	m.Weights = []agentspec.WeightRef{{Name: "tiny", Digest: digest}}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	dir := runner.RunDir(r.Home, o.RunID)
	log, _ := os.ReadFile(filepath.Join(dir, "logs", "agent.log"))
	if !o.Valid || o.Score == nil {
		t.Fatalf("valid %v score %v reason %q; agent log:\n%s", o.Valid, o.Score, o.InvalidReason, log)
	}
	// The agent talked to the model over loopback: its log holds the stand-in's two turns.
	if !strings.Contains(string(log), "Action: list_files[/public]") || !strings.Contains(string(log), "Final Answer:") {
		t.Fatalf("agent log lacks the model's turns:\n%s", log)
	}
	if pm := o.Predicate.Model; pm == nil || pm.Image != img || pm.Name != "standin" || pm.GPUCount != 0 || pm.ReadySeconds <= 0 ||
		len(pm.Weights) != 1 || pm.Weights[0].Digest != digest {
		t.Fatalf("attested model %+v", pm)
	}
	if ml, err := os.ReadFile(filepath.Join(dir, "logs", "model.log")); err != nil || !strings.Contains(string(ml), "test double") {
		t.Fatalf("model log %q, %v", ml, err)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after the run: %+v", left)
	}
}

// checkLoopbackOnly asserts a netcheck listing shows loopback and nothing else: one
// interface, lo, with 127.0.0.1 and ::1, no IPv4 route, and IPv6 routes only on lo.
func checkLoopbackOnly(t *testing.T, who, out string) {
	t.Helper()
	ifaces := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "iface":
			ifaces++
			if f[1] != "lo" {
				t.Fatalf("%s sees interface %s:\n%s", who, f[1], out)
			}
			for _, a := range f[2:] {
				if a != "127.0.0.1/8" && a != "::1/128" {
					t.Fatalf("%s has address %s:\n%s", who, a, out)
				}
			}
		case f[0] == "route4":
			t.Fatalf("%s has an IPv4 route: %s", who, line)
		case f[0] == "route6":
			if f[len(f)-1] != "lo" {
				t.Fatalf("%s has an IPv6 route off loopback: %s", who, line)
			}
		}
	}
	if ifaces != 1 {
		t.Fatalf("%s: %d interfaces listed:\n%s", who, ifaces, out)
	}
}

// The pod through runner.StartPod: the model has no network, the agent shares its loopback
// and reaches the model there, and neither sees any other address (listed from inside;
// nothing is sent anywhere but 127.0.0.1).
func TestModelPodLoopbackOnly(t *testing.T) {
	r, ex, img := podRunner(t)
	_ = r
	env := executortest.Env{Image: img, Agent: "/model"}
	model := env.Task(t, "serve", "--addr", "127.0.0.1:8000")
	model.PublicDir, model.WorkspaceDir, model.OutputDir, model.PromptPath = "", "", "", ""
	task := env.Task(t, "serve", "--addr", "127.0.0.1:9000") // an agent that waits
	pod, err := runner.StartPod(bg, ex, model, runner.Readiness{Probe: []string{"/model", "probe", "http://127.0.0.1:8000/health"}, Timeout: 30 * time.Second}, task)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		runner.StopModel(bg, ex, pod.Task)
		runner.StopModel(bg, ex, pod.Model)
	})
	code, out, err := ex.Exec(bg, pod.Task, []string{"/model", "probe", "http://127.0.0.1:8000/v1/models"})
	if err != nil || code != 0 {
		t.Fatalf("the agent cannot reach its model on loopback: %d %s %v", code, out, err)
	}
	for who, h := range map[string]*runner.Handle{"agent": pod.Task, "model": pod.Model} {
		code, out, err := ex.Exec(bg, h, []string{"/model", "netcheck"})
		if err != nil || code != 0 {
			t.Fatalf("%s netcheck: %d %s %v", who, code, out, err)
		}
		checkLoopbackOnly(t, who, string(out))
	}
	cli := ex.Client()
	mi, err := cli.ContainerInspect(bg, docker.ContainerName(model.ID))
	if err != nil {
		t.Fatal(err)
	}
	ai, err := cli.ContainerInspect(bg, docker.ContainerName(task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if mi.HostConfig.NetworkMode != "none" || string(ai.HostConfig.NetworkMode) != "container:"+mi.ID {
		t.Fatalf("network modes: model %q, agent %q (model container %s)", mi.HostConfig.NetworkMode, ai.HostConfig.NetworkMode, mi.ID)
	}
}

func TestModelNeverReadyFailsTheRun(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img, "--never-ready")
	m.ReadyTimeoutSeconds = 2
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !errors.Is(err, runner.ErrModelNotReady) || !strings.Contains(err.Error(), "did not become ready within 2s") {
		t.Fatalf("err %v, want the model's readiness failure", err)
	}
	runs, _ := runner.ListRuns(r.Home)
	if len(runs) != 1 || runs[0].Phase != runner.PhaseFailed || !strings.Contains(runs[0].Error, "did not become ready") {
		t.Fatalf("runs %+v", runs)
	}
	if left := runContainers(t, ex, runs[0].ID); len(left) != 0 {
		t.Fatalf("containers left: %+v", left)
	}
}

func TestModelGoesDownWithAgentAtWallClock(t *testing.T) {
	r, ex, img := podRunner(t)
	task := copyTask(t, "sentiment", func(y string) string {
		return strings.Replace(y, "wall_clock_seconds: 120", "wall_clock_seconds: 20", 1)
	})
	agent := &agentspec.Spec{Name: "hang", Version: "1", Image: img, Command: []string{"/testagent", "sleep", "1h"}, Model: standinModel(img)}
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Predicate.Exit.TimedOut {
		t.Fatalf("exit %+v, want killed at the wall clock", o.Predicate.Exit)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after the agent's wall clock: %+v", left)
	}
}

func TestModelPolicyRefusesUnlistedImage(t *testing.T) {
	r, _, img := podRunner(t)
	r.Models = runner.ModelPolicy{}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: standinModel(img)}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !strings.Contains(err.Error(), "runner.models.images") {
		t.Fatalf("err %v", err)
	}
}

// SIGKILL of the node while agent and model run; the next process re-attaches to both,
// finishes the run, and removes both containers.
func TestModelPodSIGKILLRecovery(t *testing.T) {
	r, ex, img := podRunner(t)
	agent := agentspec.Spec{Name: "sleeper", Version: "1", Image: img, Command: []string{"/testagent", "sleep", "6s"}, Model: standinModel(img)}
	o := sigkillRecovery(t, r, agent)
	if o.Predicate.Model == nil || o.Predicate.Model.Image != img {
		t.Fatalf("recovered run attests model %+v", o.Predicate.Model)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after recovery: %+v", left)
	}
}

// SIGKILL of a node whose run records a transcript: the next process re-attaches to agent,
// bridge, recorder and model, attests the transcript, and removes all four containers.
func TestModelPodTranscriptSIGKILLRecovery(t *testing.T) {
	r, ex, img := podRunner(t)
	r.ModelProxy = executortest.StaticBinary(t, "./cmd/evalmesh-model-proxy")
	agent := agentspec.Spec{Name: "sleeper", Version: "1", Image: img, Command: []string{"/testagent", "sleep", "6s"}, Model: standinModel(img)}
	o := sigkillRecovery(t, r, agent)
	if ref := runner.TranscriptOf(r.Home, o); ref == nil || ref.Calls != 0 {
		t.Fatalf("recovered run's transcript %+v, want one with no calls", ref)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after recovery: %+v", left)
	}
}

// SIGKILL while the model is still loading: recovery removes the model (and fails the run,
// whose agent never started).
func TestModelPodSIGKILLWhileLoading(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img, "--never-ready")
	m.ReadyTimeoutSeconds = 600
	agent := agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	req, _ := json.Marshal(map[string]any{"Home": r.Home.Dir, "Task": exampleTask(t, "arithmetic"), "Executor": "docker", "Agent": agent, "Models": r.Models})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_NODE="+string(req))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.WaitFor(t, 60*time.Second, "the node to record its model task", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) == 1 && runs[0].ModelHandle != nil {
			id = runs[0].ID
			return true
		}
		return false
	})
	cmd.Process.Kill()
	cmd.Wait()
	if c := runContainers(t, ex, id); len(c) != 1 || !c[0].Running {
		t.Fatalf("after SIGKILL the model should still run: %+v", c)
	}
	rec, err := r.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].Err == nil {
		t.Fatalf("recovered %+v, want the run failed", rec)
	}
	if left := runContainers(t, ex, id); len(left) != 0 {
		t.Fatalf("containers left after recovery: %+v", left)
	}
}

func TestModelWeightsDigestMismatchFailsTheRun(t *testing.T) {
	r, _, img := podRunner(t)
	weightsFolder(t, r)
	m := standinModel(img)
	m.Weights = []agentspec.WeightRef{{Name: "tiny", Digest: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"}}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !strings.Contains(err.Error(), "the spec records bafkreigh2ak") {
		t.Fatalf("err %v, want the digest mismatch", err)
	}
}

// The node records the agent's traffic with its model: the recording proxy (a static binary
// mounted into a container beside the model) sits where the agent's OPENAI_BASE_URL points,
// and the run attests the transcript as a subject. The stand-in model (a test double for an
// LLM) counts tokens as words, so every call's usage is known from its request.
func TestModelPodTranscript(t *testing.T) {
	r, ex, img := podRunner(t)
	r.ModelProxy = executortest.StaticBinary(t, "./cmd/evalmesh-model-proxy")
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: standinModel(img)}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	dir := runner.RunDir(r.Home, o.RunID)
	if !o.Valid {
		log, _ := os.ReadFile(filepath.Join(dir, "logs", "agent.log"))
		plog, _ := os.ReadFile(filepath.Join(dir, "logs", "proxy.log"))
		t.Fatalf("invalid run %q; agent log:\n%s\nproxy log:\n%s", o.InvalidReason, log, plog)
	}
	env, err := attest.DecodeEnvelope(o.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	shape, tc, ok := attest.TranscriptShapeOf(st)
	if !ok {
		t.Fatalf("no transcript subject in %+v", st.Subject)
	}
	object := func(c string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(runner.ObjectsDir(r.Home), c))
		if err != nil || agentspec.RawCID(b) != c {
			t.Fatalf("object %s: %d bytes, %v", c, len(b), err)
		}
		return b
	}
	tr, err := attest.ParseTranscript(object(tc))
	if err != nil {
		t.Fatal(err)
	}
	// The ReAct agent and the stand-in take two turns: look at the files, then answer.
	if len(tr.Calls) != 2 || tr.Totals.Calls != 2 || tr.Totals.UnrecordedCalls != 0 || tr.Model != "standin" {
		t.Fatalf("transcript %+v", tr)
	}
	var prompt, completion int64
	for _, c := range tr.Calls {
		if c.Method != "POST" || c.Path != "/v1/chat/completions" || c.Status != 200 || c.Usage == nil || c.Request.Truncated || c.Response.Truncated {
			t.Fatalf("call %+v", c)
		}
		// The bodies are stored by CID and are what went over the wire: the stand-in's
		// reply to the request's conversation, with its word-count usage.
		var req struct{ Messages []standin.Message }
		if err := json.Unmarshal(object(c.Request.CID), &req); err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Choices []struct{ Message standin.Message }
			Usage   attest.TokenUsage
		}
		if err := json.Unmarshal(object(c.Response.CID), &resp); err != nil {
			t.Fatal(err)
		}
		reply := standin.Reply(req.Messages)
		u := standin.Usage(req.Messages, reply)
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != reply || *c.Usage != resp.Usage ||
			c.Usage.PromptTokens != int64(u["prompt_tokens"]) || c.Usage.CompletionTokens != int64(u["completion_tokens"]) {
			t.Fatalf("call %d: usage %+v, want %v; response %+v", c.Seq, c.Usage, u, resp)
		}
		prompt += c.Usage.PromptTokens
		completion += c.Usage.CompletionTokens
	}
	if prompt == 0 || shape != (attest.TranscriptShape{Calls: 2, PromptTokens: prompt, CompletionTokens: completion}) || tr.Totals.PromptTokens != prompt {
		t.Fatalf("attested shape %+v, totals %+v; calls sum to %d prompt, %d completion tokens", shape, tr.Totals, prompt, completion)
	}
	// What `evalmesh run` prints.
	if ref := runner.TranscriptOf(r.Home, o); ref == nil || ref.CID != tc || ref.TranscriptShape != shape || ref.Path != filepath.Join(runner.ObjectsDir(r.Home), tc) {
		t.Fatalf("TranscriptOf: %+v", ref)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after the run: %+v", left)
	}
}

// An agent that goes for the model's own address, not the base URL it was given, still
// reaches the model only through the recorder: its network namespace is the bridge's, where
// the model's port is the bridge. So the call is in the transcript.
func TestModelPodAgentCannotBypassTheRecorder(t *testing.T) {
	r, _, img := podRunner(t)
	r.ModelProxy = executortest.StaticBinary(t, "./cmd/evalmesh-model-proxy")
	agent := &agentspec.Spec{Name: "direct", Version: "1", Image: img, Model: standinModel(img),
		Command: []string{"/model", "probe", "http://127.0.0.1:8000/v1/models"}}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if o.Predicate.Exit.Code != 0 {
		log, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "agent.log"))
		t.Fatalf("the agent did not reach its model: %+v\n%s", o.Predicate.Exit, log)
	}
	ref := runner.TranscriptOf(r.Home, o)
	if ref == nil {
		t.Fatal("no transcript")
	}
	b, err := os.ReadFile(ref.Path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := attest.ParseTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Calls) != 1 || tr.Calls[0].Method != "GET" || tr.Calls[0].Path != "/v1/models" || tr.Calls[0].Status != 200 || tr.Calls[0].Usage != nil {
		t.Fatalf("transcript calls %+v, want the agent's one GET /v1/models", tr.Calls)
	}
}
