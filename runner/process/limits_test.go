package process

import (
	"reflect"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

func TestTaskEnvDoesNotLeakNodeEnv(t *testing.T) {
	t.Setenv("EVALMESH_NODE_SECRET", "hunter2")
	env := taskEnv(runner.TaskConfig{OutputDir: "/o", GPUs: []string{"GPU-1"}, Env: map[string]string{"A": "b"}})
	got := map[string]bool{}
	for _, kv := range env {
		got[kv] = true
	}
	for _, want := range []string{"A=b", "EVALMESH_OUTPUT=/o", "EVALMESH_GPUS=GPU-1", "CUDA_VISIBLE_DEVICES=GPU-1"} {
		if !got[want] {
			t.Errorf("env lacks %s: %v", want, env)
		}
	}
	if got["EVALMESH_NODE_SECRET=hunter2"] {
		t.Error("node environment leaked into the task")
	}
}

func TestCgroupFiles(t *testing.T) {
	got := cgroupFiles(runner.Limits{MemoryBytes: 1 << 20, PIDs: 10, NanoCPUs: 5e8})
	want := map[string][][2]string{
		"memory": {{"memory.limit_in_bytes", "1048576"}, {"memory.memsw.limit_in_bytes", "1048576"}},
		"pids":   {{"pids.max", "10"}},
		"cpu":    {{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "50000"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cgroupFiles = %v, want %v", got, want)
	}
	if len(cgroupFiles(runner.Limits{WallClock: 5})) != 0 {
		t.Error("no limits should need no cgroups")
	}
}
