package slurm

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/runner"
)

// ownedOptions are the sbatch options evalmesh sets itself from the task: a lab's extra
// options (Options.ExtraSbatch) may not override them, or a task could escape its time
// limit, its GPUs or its output folder.
var ownedOptions = map[string]bool{
	"--time": true, "-t": true, "--gpus": true, "-G": true, "--gres": true, "--gpus-per-node": true,
	"--gpus-per-task": true, "--output": true, "-o": true, "--error": true, "-e": true,
	"--chdir": true, "-D": true, "--job-name": true, "-J": true, "--partition": true, "-p": true,
	"--account": true, "-A": true, "--qos": true, "-q": true, "--wrap": true, "--parsable": true,
	"--requeue": true, "--no-requeue": true, "--mem": true, "--cpus-per-task": true, "-c": true,
	"--array": true, "-a": true, "--export": true, "--uid": true, "--gid": true,
	"--hold": true, "-H": true, "--wait": true, "-W": true, "--nodes": true, "-N": true,
	"--ntasks": true, "-n": true,
}

// checkExtraOptions refuses extra sbatch options that are not "--name" or "--name=value",
// or that name an option evalmesh sets from the task.
func checkExtraOptions(opts []string) error {
	for _, o := range opts {
		name, _, _ := strings.Cut(o, "=")
		if !strings.HasPrefix(name, "--") || len(name) < 3 || strings.ContainsAny(o, "\n\x00") {
			return fmt.Errorf("slurm executor: extra sbatch option %q: write each as --name or --name=value (runner.slurm.sbatch_options in config.yaml)", o)
		}
		if ownedOptions[name] {
			return fmt.Errorf("slurm executor: extra sbatch option %q: evalmesh sets %s from the task; remove it from runner.slurm.sbatch_options", o, name)
		}
	}
	return nil
}

// timeLimitMinutes is the job's time limit for a task wall clock: Slurm counts whole
// minutes and checks them about every 30 s, so the compute node enforces the exact wall
// clock itself (the docker executor's deadline) and Slurm's limit is the backstop one
// minute after that deadline plus the stop grace. 0: no limit (the partition's default).
func timeLimitMinutes(wall, grace time.Duration) int {
	if wall <= 0 {
		return 0
	}
	d := wall + grace
	return int((d+time.Minute-1)/time.Minute) + 1
}

// sbatchArgs are the sbatch arguments for a task (the script comes last). It is pure so
// what a job asks Slurm for (GPUs by --gpus, memory, CPUs, time) is unit-tested without a
// cluster.
func sbatchArgs(cfg runner.TaskConfig, o Options, jobDir string) []string {
	args := []string{
		"--parsable",
		"--job-name=" + jobName(cfg.ID),
		"--chdir=" + jobDir,
		"--output=" + filepath.Join(jobDir, outFile),
		"--no-requeue", // a requeued job would run the agent twice
		"--nodes=1",
		"--ntasks=1",
	}
	if o.Partition != "" {
		args = append(args, "--partition="+o.Partition)
	}
	if o.Account != "" {
		args = append(args, "--account="+o.Account)
	}
	if o.QoS != "" {
		args = append(args, "--qos="+o.QoS)
	}
	if m := timeLimitMinutes(cfg.Limits.WallClock, o.StopGrace); m > 0 {
		args = append(args, fmt.Sprintf("--time=%d", m))
	}
	if n := len(cfg.GPUs); n > 0 {
		args = append(args, fmt.Sprintf("--gpus=%d", n))
	}
	if c := cfg.Limits.NanoCPUs; c > 0 {
		args = append(args, fmt.Sprintf("--cpus-per-task=%d", (c+1e9-1)/1e9))
	}
	if m := cfg.Limits.MemoryBytes; m > 0 {
		// Slurm schedules the memory; the compute node's engine enforces it on the container
		// (which Slurm's cgroups do not contain).
		args = append(args, fmt.Sprintf("--mem=%dM", (m+(1<<20)-1)>>20))
	}
	args = append(args, o.ExtraSbatch...)
	return append(args, filepath.Join(jobDir, scriptFile))
}

// jobName is the Slurm job name of a task: "evalmesh-" plus the task ID (squeue shows it).
func jobName(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 100 {
		s = s[:100]
	}
	return "evalmesh-" + s
}

// jobScript is the batch script: it execs the job command on the compute node, so the
// signals Slurm sends at a cancel or the time limit reach evalmesh there (which stops the
// container: the engine's containers are not in the job's cgroup).
func jobScript(jobCommand []string, jobDir string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# evalmesh: one task in a container on this node (runner/slurm)\nexec")
	for _, a := range append(append([]string(nil), jobCommand...), filepath.Join(jobDir, specFile)) {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
