package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// testEnv skips the test when no Docker engine answers.
func testEnv(t *testing.T) (executortest.Env, *client.Client) {
	return testEnvOn(t, executortest.DockerClient(t))
}

// The conformance suite and the hostile agents against podman (docs/operating.md, "Podman").
func TestPodmanConformance(t *testing.T) {
	env, _ := testEnvOn(t, executortest.PodmanClient(t))
	executortest.Run(t, env)
}

func TestPodmanHostileAgents(t *testing.T) {
	cli := executortest.PodmanClient(t)
	env, _ := testEnvOn(t, cli)
	hostileAgents(t, env, cli)
}

func testEnvOn(t *testing.T, cli *client.Client) (executortest.Env, *client.Client) {
	img := executortest.Image(t, cli)
	newExec := func() runner.Executor {
		ex, err := New(Options{Client: cli, StopGrace: time.Second})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return ex
	}
	return executortest.Env{
		New:   newExec,
		Image: img,
		Agent: "/agent",
		Remove: func(t *testing.T, h *runner.Handle) {
			s, err := decodeState(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := cli.ContainerRemove(context.Background(), s.ContainerID, container.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		},
	}, cli
}

func TestConformance(t *testing.T) {
	env, _ := testEnv(t)
	executortest.Run(t, env)
}

// runHostile runs the test agent in mode args under cfg tweaks and returns result and log.
func runHostile(t *testing.T, env executortest.Env, tweak func(*runner.TaskConfig), args ...string) (runner.TaskConfig, *runner.ExitResult, string) {
	t.Helper()
	ex := env.New()
	cfg := env.Task(t, args...)
	if tweak != nil {
		tweak(&cfg)
	}
	h := executortest.Start(t, ex, cfg)
	res := executortest.Wait(t, ex, h)
	log := executortest.Log(t, h)
	t.Logf("result %+v\n%s", res, log)
	return cfg, res, log
}

// The hostile agents: each is contained and its result says why it ended.
func TestHostileAgents(t *testing.T) {
	env, cli := testEnv(t)
	hostileAgents(t, env, cli)
}

func hostileAgents(t *testing.T, env executortest.Env, cli *client.Client) {
	engine, err := Engine(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine %s %s at %s, cgroup v%s, rootless %v", engine.Name, engine.Version, engine.Host, engine.CgroupVersion, engine.Rootless)

	t.Run("ReadsPrivateLabels", func(t *testing.T) {
		t.Parallel()
		const secret = "LABEL-SECRET-7f3a9c"
		_, res, log := runHostile(t, env, func(cfg *runner.TaskConfig) {
			// The bundle's private/ sits next to public/ on the host, as in an unpacked bundle.
			priv := filepath.Join(filepath.Dir(cfg.PublicDir), "private")
			if err := os.MkdirAll(priv, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(priv, "test_labels.csv"), []byte("id,label\n1,"+secret+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "private", secret)
		if !res.Successful() {
			t.Fatalf("hunting agent did not finish: %+v", res)
		}
		if !strings.Contains(log, "private-dir: absent") || !strings.Contains(log, "secret-found: no") {
			t.Fatalf("the agent reached private data:\n%s", log)
		}
		if m := regexp.MustCompile(`files-read: (\d+)`).FindStringSubmatch(log); m == nil || m[1] == "0" {
			t.Fatalf("the hunt read no files, so it proves nothing:\n%s", log)
		}
	})

	t.Run("LooksForNetwork", func(t *testing.T) {
		t.Parallel()
		_, res, log := runHostile(t, env, nil, "netifs")
		if !res.Successful() || !strings.Contains(log, "interfaces: lo\n") {
			t.Fatalf("want only the loopback interface, got %+v:\n%s", res, log)
		}
	})

	t.Run("ForkBomb", func(t *testing.T) {
		t.Parallel()
		const pids = 32
		_, res, log := runHostile(t, env, func(cfg *runner.TaskConfig) {
			cfg.Limits.PIDs = pids
			cfg.Limits.WallClock = time.Minute
		}, "forkbomb")
		if res.Successful() || res.TimedOut {
			t.Fatalf("fork bomb should be stopped by the pids limit, not run on or time out: %+v", res)
		}
		if m := regexp.MustCompile(`forkbomb: started (\d+), then`).FindStringSubmatch(log); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= pids {
				t.Fatalf("started %d processes under a limit of %d", n, pids)
			}
		} else if !strings.Contains(log, "failed to create new OS thread") && !strings.Contains(log, "resource temporarily unavailable") {
			t.Fatalf("fork bomb ended (%+v) without hitting the pids limit:\n%s", res, log)
		}
	})

	t.Run("AllocatesPastMemoryLimit", func(t *testing.T) {
		t.Parallel()
		_, res, log := runHostile(t, env, func(cfg *runner.TaskConfig) {
			cfg.Limits.MemoryBytes = 64 << 20
		}, "alloc", "1024")
		switch {
		case engine.Name == EnginePodman && !res.OOMKilled && res.Signal == 9:
			// Podman 4.3 on cgroup v1 kills the task at its limit but does not report
			// OOMKilled (conmon misses the v1 OOM event); the limit itself held.
			t.Logf("podman %s: killed by SIGKILL at the memory limit, not reported as OOMKilled", engine.Version)
		case !res.OOMKilled || res.Successful():
			t.Fatalf("result = %+v, want OOMKilled", res)
		}
		if strings.Contains(log, "allocated all") {
			t.Fatal("agent allocated 1 GiB under a 64 MiB limit")
		}
	})

	t.Run("OutlivesWallClock", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		_, res, _ := runHostile(t, env, func(cfg *runner.TaskConfig) {
			cfg.Limits.WallClock = 2 * time.Second
		}, "sleep", "1h")
		if !res.TimedOut || res.Successful() {
			t.Fatalf("result = %+v, want TimedOut", res)
		}
		if took := time.Since(start); took > time.Minute {
			t.Errorf("stopping took %v", took)
		}
	})

	t.Run("WritesOutsideOutput", func(t *testing.T) {
		t.Parallel()
		cfg, res, log := runHostile(t, env, nil, "writes")
		if !res.Successful() {
			t.Fatalf("result = %+v", res)
		}
		for _, p := range []string{"/evil", "/etc/evil", "/task/evil", "/public/evil", "/task/prompt.md"} {
			if !strings.Contains(log, "write "+p+": denied") {
				t.Errorf("write to %s was not denied:\n%s", p, log)
			}
		}
		for _, p := range []string{"/tmp/ok", "/workspace/ok", "/output/ok"} {
			if !strings.Contains(log, "write "+p+": ok") {
				t.Errorf("write to %s should work:\n%s", p, log)
			}
		}
		if _, err := os.Stat(filepath.Join(cfg.OutputDir, "ok")); err != nil {
			t.Errorf("the output write is not on the host: %v", err)
		}
		if entries, _ := os.ReadDir(cfg.PublicDir); len(entries) != 1 {
			t.Errorf("public/ on the host changed: %v", entries)
		}
		if b, _ := os.ReadFile(cfg.PromptPath); string(b) != "Solve the task.\n" {
			t.Errorf("prompt on the host changed: %q", b)
		}
	})
}

func TestMissingImageNeverPulls(t *testing.T) {
	env, _ := testEnv(t)
	cfg := env.Task(t, "exit", "0")
	cfg.Image = "evalmesh-no-such-image:never"
	_, err := env.New().Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "never pulls") {
		t.Fatalf("Start with a missing image = %v, want an error saying it is not pulled", err)
	}
}

func TestLoadImage(t *testing.T) {
	env, cli := testEnv(t)
	ctx := context.Background()
	ex := env.New().(*Executor)
	want, err := ex.ResolveImage(ctx, env.Image)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImageSave(ctx, []string{env.Image})
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "agent.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	f.Close()
	got, err := ex.LoadImage(ctx, tarPath)
	if err != nil {
		t.Fatalf("LoadImage: %v", err)
	}
	if got != want {
		t.Errorf("LoadImage = %s, want %s", got, want)
	}
	if byID, err := ex.ResolveImage(ctx, got); err != nil || byID != want {
		t.Errorf("ResolveImage(by ID %s) = %s, %v", got, byID, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.tar")
	os.WriteFile(bad, []byte("not a tar"), 0o644)
	if _, err := ex.LoadImage(ctx, bad); err == nil {
		t.Error("LoadImage of garbage succeeded")
	}
}

func TestListFindsOrphans(t *testing.T) {
	env, _ := testEnv(t)
	ex := env.New().(*Executor)
	cfg := env.Task(t, "sleep", "1h")
	h := executortest.Start(t, ex, cfg) // its handle is "never persisted"
	cs, err := ex.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found *Container
	for i := range cs {
		if cs[i].TaskID == cfg.ID {
			found = &cs[i]
		}
	}
	if found == nil || !found.Running || found.Name != ContainerName(cfg.ID) {
		t.Fatalf("List = %+v, want running container for %s", cs, cfg.ID)
	}
	if err := ex.Destroy(context.Background(), HandleFor(*found)); err != nil {
		t.Fatal(err)
	}
	if err := ex.Recover(context.Background(), h); !errors.Is(err, runner.ErrTaskLost) {
		t.Fatalf("Recover after destroying the orphan = %v, want ErrTaskLost", err)
	}
}

// A node that died between ContainerCreate and persisting the driver state holds a handle
// with only the task config; Destroy still finds the container by its name.
func TestDestroyWithoutDriverStateRemovesByName(t *testing.T) {
	env, _ := testEnv(t)
	ex := env.New().(*Executor)
	cfg := env.Task(t, "sleep", "1h")
	h := executortest.Start(t, ex, cfg)
	bare := &runner.Handle{Driver: DriverName, Config: cfg}
	if err := ex.Destroy(context.Background(), bare); err != nil {
		t.Fatalf("Destroy(handle without driver state) = %v", err)
	}
	if err := ex.Recover(context.Background(), h); !errors.Is(err, runner.ErrTaskLost) {
		t.Fatalf("Recover after Destroy by name = %v, want ErrTaskLost", err)
	}
}
