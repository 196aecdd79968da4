package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/runner"
)

// Lines as Slurm 22.05 prints them (captured from the test cluster).
const (
	jobRunning = `JobId=7 JobName=evalmesh-x UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:01:05 TimeLimit=00:02:00 TimeMin=N/A SubmitTime=2026-12-01T23:38:18 EligibleTime=2026-12-01T23:38:18 AccrueTime=2026-12-01T23:38:18 StartTime=2026-12-01T23:38:20 EndTime=2026-12-01T23:40:20 Deadline=N/A Partition=evalmesh AllocNode:Sid=vm:2901 NodeList=localhost BatchHost=localhost NumNodes=1 NumCPUs=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Command=/runs/x/job.sh WorkDir=/runs/x Power= TresPerJob=gres:gpu:2`
	jobPending = `JobId=8 JobName=wrap JobState=PENDING Reason=BeginTime ExitCode=0:0 RunTime=00:00:00 StartTime=2026-12-02T00:40:00 EndTime=Unknown Partition=evalmesh NodeList=(null) TRES=cpu=1,node=1`
	sacctLine  = "12|CANCELLED by 0|0:15|gpu-07|h200|2026-12-01T10:00:00|2026-12-01T11:00:00|3600|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|123456\n"
)

func TestParseJob(t *testing.T) {
	j, err := parseJob([]byte(jobRunning + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "7" || j.State != "RUNNING" || j.Node != "localhost" || j.Partition != "evalmesh" || j.GPUs != 2 ||
		j.Elapsed != 65*time.Second || j.Start.IsZero() || !j.active() {
		t.Errorf("parseJob = %+v", j)
	}
	p, err := parseJob([]byte(jobPending))
	if err != nil || p.State != "PENDING" || p.Reason != "BeginTime" || p.Node != "" || !p.End.IsZero() || !p.active() {
		t.Errorf("pending job = %+v, %v", p, err)
	}
	s, err := parseSacct([]byte(sacctLine))
	if err != nil || s.State != "CANCELLED" || s.Signal != 15 || s.Node != "gpu-07" || s.GPUs != 4 || s.Elapsed != time.Hour || s.EnergyJ != 123456 || s.active() {
		t.Errorf("parseSacct = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "garbage", "JobId=1"} {
		if _, err := parseJob([]byte(bad)); err == nil {
			t.Errorf("parseJob(%q) accepted", bad)
		}
	}
}

func TestParseDurationAndTRES(t *testing.T) {
	for in, want := range map[string]time.Duration{"00:00:07": 7 * time.Second, "1-02:03:04": 26*time.Hour + 3*time.Minute + 4*time.Second, "05:06": 5*time.Minute + 6*time.Second, "INVALID": 0, "": 0} {
		if got := parseDuration(in); got != want {
			t.Errorf("parseDuration(%q) = %v, want %v", in, got, want)
		}
	}
	if n := tresCount("cpu=8,gres/gpu:h200=2,gres/gpu:a100=1", "gres/gpu"); n != 3 {
		t.Errorf("typed gpu TRES = %d, want 3", n)
	}
	if n := tresCount("cpu=8,gres/gpu=4,gres/gpu:h200=4", "gres/gpu"); n != 4 {
		t.Errorf("gpu TRES = %d, want 4", n)
	}
}

func TestParseNodes(t *testing.T) {
	out := "NodeName=gpu-01 CPUAlloc=8 CPUTot=64 Gres=gpu:h200:8(S:0-1) GresUsed=gpu:h200:3(IDX:0-2) State=MIXED Partitions=h200,all\n" +
		"NodeName=gpu-02 CPUAlloc=0 CPUTot=64 Gres=gpu:h200:8(S:0-1) GresUsed=gpu:h200:0(IDX:N/A) State=IDLE+DRAIN Partitions=h200\n" +
		"NodeName=cpu-01 CPUAlloc=0 CPUTot=32 Gres=(null) State=IDLE Partitions=cpu\n"
	nodes := parseNodes([]byte(out))
	if len(nodes) != 3 || nodes[0].GPUs != 8 || nodes[0].GPUsUsed != 3 || nodes[0].GPUType != "h200" || !nodes[0].usable() ||
		nodes[1].usable() || nodes[2].GPUs != 0 || nodes[2].CPUs != 32 {
		t.Errorf("parseNodes = %+v", nodes)
	}
	if typ, n := gresGPUs("gpu:a100:2(S:0),gpu:h100:1(S:1),nic:1"); typ != "a100" || n != 3 {
		t.Errorf("gresGPUs = %q %d", typ, n)
	}
	if n := maxJobsPU("QOS=normal(1)\n    MaxJobsPU=4(1) MaxJobsAccruePU=N(0)"); n != 4 {
		t.Errorf("maxJobsPU = %d", n)
	}
}

// result maps each final job state onto what the runner sees.
func TestResultMapping(t *testing.T) {
	ex := &Executor{o: Options{Now: time.Now}}
	dir := t.TempDir()
	h := &runner.Handle{Driver: DriverName, Config: runner.TaskConfig{ID: "t"}}
	s := state{JobID: "9", JobDir: dir}
	rec := &record{Node: "gpu-03", Exit: runner.ExitResult{ExitCode: 143, Signal: 15, Finished: time.Now()}}
	for _, tc := range []struct {
		state   string
		rec     *record
		check   func(*runner.ExitResult) bool
		lostErr string
	}{
		{"COMPLETED", &record{Exit: runner.ExitResult{}}, func(r *runner.ExitResult) bool { return r.Successful() }, ""},
		{"FAILED", &record{Exit: runner.ExitResult{ExitCode: 3}}, func(r *runner.ExitResult) bool { return r.ExitCode == 3 }, ""},
		{"TIMEOUT", rec, func(r *runner.ExitResult) bool { return r.TimedOut && r.Signal == 15 }, ""},
		{"TIMEOUT", nil, func(r *runner.ExitResult) bool { return r.TimedOut && !r.Successful() }, ""},
		{"OUT_OF_MEMORY", nil, func(r *runner.ExitResult) bool { return r.OOMKilled }, ""},
		{"CANCELLED", rec, nil, "cancelled outside evalmesh"},
		{"NODE_FAIL", nil, nil, "NODE_FAIL: its node failed on node gpu-03"},
		{"PREEMPTED", rec, nil, "preempted"},
	} {
		v := taskView{job: &job{ID: "9", State: tc.state, Node: "gpu-03"}, rec: tc.rec}
		res, err := ex.result(h, s, v)
		if tc.lostErr != "" {
			if !errors.Is(err, runner.ErrTaskLost) || !strings.Contains(err.Error(), tc.lostErr) {
				t.Errorf("%s: err = %v, want ErrTaskLost saying %q", tc.state, err, tc.lostErr)
			}
			continue
		}
		if err != nil || !tc.check(res) {
			t.Errorf("%s: result = %+v, %v", tc.state, res, err)
		}
	}
	// Ended without the node's record: infrastructure, not the agent, and not "lost".
	if _, err := ex.result(h, s, taskView{job: &job{ID: "9", State: "FAILED", ExitCode: 125}}); err == nil || errors.Is(err, runner.ErrTaskLost) || !strings.Contains(err.Error(), "without the node's record") {
		t.Errorf("FAILED without record: %v", err)
	}
}

func FuzzParseJob(f *testing.F) {
	for _, s := range []string{jobRunning, jobPending, "JobId=1 JobState=X RunTime=1-2:3:4 TRES=gres/gpu=-1", "NodeName=a Gres=gpu:(((:1", sacctLine, "|||||||||"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if j, err := parseJob([]byte(s)); err == nil && (j.ID == "" || j.State == "") {
			t.Fatalf("parseJob accepted a record without ID or state: %+v", j)
		}
		if j, err := parseSacct([]byte(s)); err == nil && j.ID == "" {
			t.Fatalf("parseSacct accepted a line without ID: %+v", j)
		}
		for _, n := range parseNodes([]byte(s)) {
			if n.GPUs < 0 || n.GPUsUsed < 0 {
				t.Fatalf("negative GPU count: %+v", n)
			}
		}
		_ = parseDuration(s)
		_ = maxJobsPU(s)
	})
}

func TestUsage(t *testing.T) {
	s := state{JobID: "1", JobDir: "/d", GPUs: 2}
	g, e := usage(s, taskView{job: &job{State: "COMPLETED", GPUs: 4, Elapsed: 90 * time.Second, EnergyJ: 500}})
	if g != 360 || e != 500 {
		t.Errorf("usage = %v GPU-s, %v J; want 360, 500 (Slurm's TRES and energy)", g, e)
	}
	g, e = usage(s, taskView{job: &job{State: "COMPLETED", Elapsed: 10 * time.Second, EnergyJ: 500}, rec: &record{EnergyJoules: 42}})
	if g != 20 || e != 42 {
		t.Errorf("usage = %v GPU-s, %v J; want 20 (asked GPUs), 42 (the node's NVML)", g, e)
	}
}
