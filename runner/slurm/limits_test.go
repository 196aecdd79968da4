package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/runner"
)

func TestSbatchArgs(t *testing.T) {
	cfg := runner.TaskConfig{
		ID:      "20261201T000000Z-ab12cd34-agent",
		GPUs:    []string{"slurm:n1/gpu0", "slurm:n1/gpu1"},
		Limits:  runner.Limits{MemoryBytes: 3<<30 + 1, NanoCPUs: 2500000000, WallClock: 90 * time.Minute},
		LogPath: "/runs/r/logs/agent.log",
	}
	o := Options{Partition: "h200", Account: "evals", QoS: "normal", StopGrace: 10 * time.Second, ExtraSbatch: []string{"--constraint=nvlink"}}
	got := strings.Join(sbatchArgs(cfg, o, "/runs/r/logs/slurm-x"), " ")
	want := "--parsable --job-name=evalmesh-20261201T000000Z-ab12cd34-agent --chdir=/runs/r/logs/slurm-x " +
		"--output=/runs/r/logs/slurm-x/slurm.out --no-requeue --nodes=1 --ntasks=1 --partition=h200 --account=evals " +
		"--qos=normal --time=92 --gpus=2 --cpus-per-task=3 --mem=3073M --constraint=nvlink /runs/r/logs/slurm-x/job.sh"
	if got != want {
		t.Errorf("sbatch args:\n got %s\nwant %s", got, want)
	}
	// No GPUs, no limits: Slurm's defaults, no --time.
	bare := strings.Join(sbatchArgs(runner.TaskConfig{ID: "t"}, Options{}, "/d"), " ")
	for _, no := range []string{"--gpus", "--time", "--mem", "--cpus-per-task", "--partition"} {
		if strings.Contains(bare, no) {
			t.Errorf("bare task asks for %s: %s", no, bare)
		}
	}
}

func TestTimeLimitMinutes(t *testing.T) {
	for _, tc := range []struct {
		wall, grace time.Duration
		want        int
	}{
		{0, 10 * time.Second, 0},
		{time.Second, time.Second, 2},           // 1 min rounded up, plus the backstop minute
		{50 * time.Second, 10 * time.Second, 2}, // exactly one minute
		{time.Hour, 10 * time.Second, 62},
	} {
		if got := timeLimitMinutes(tc.wall, tc.grace); got != tc.want {
			t.Errorf("timeLimitMinutes(%v, %v) = %d, want %d", tc.wall, tc.grace, got, tc.want)
		}
	}
}

func TestCheckExtraOptions(t *testing.T) {
	if err := checkExtraOptions([]string{"--constraint=h200", "--reservation=evals", "--exclusive"}); err != nil {
		t.Errorf("allowed options refused: %v", err)
	}
	for _, bad := range []string{"--time=10", "--gpus=8", "--output=/etc/x", "-t", "constraint=x", "--", "--wrap=sh", "--comment=a\nb"} {
		if err := checkExtraOptions([]string{bad}); err == nil {
			t.Errorf("option %q accepted", bad)
		}
	}
}

func TestJobScriptQuotes(t *testing.T) {
	s := jobScript([]string{"/opt/evalmesh it's", "slurm-job"}, "/runs/a b")
	want := `exec '/opt/evalmesh it'\''s' 'slurm-job' '/runs/a b/spec.json'`
	if !strings.Contains(s, want) || !strings.HasPrefix(s, "#!/bin/sh\n") {
		t.Errorf("script:\n%s\nwant a line %s", s, want)
	}
}
