package docker

import (
	"os"

	"github.com/evalmesh/evalmesh/runner"
)

// The agent's /output under the task's output limit (runner.Limits.OutputBytes): on a root
// node the container binds a tmpfs of exactly that size, mounted on the host beside the
// run's output folder, so writes past the limit fail with ENOSPC and the node's disk is never
// filled; Destroy, with the container gone, copies it into the output folder through
// runner.CollectOutput (no links followed, no FIFOs or hard links copied, refusals and a full
// mount recorded) and unmounts it. A node that cannot mount binds the output folder itself
// and Destroy only checks its size (the run is then invalid, but the disk was not protected).

// outputStage is the host folder the limited tmpfs is mounted at for a task.
func outputStage(cfg runner.TaskConfig) string { return cfg.OutputDir + ".limited" }

// stageOutput mounts the task's limited output and returns the host folder to bind at
// /output: the stage, or the output folder itself when no limit applies or none can be made.
func (e *Executor) stageOutput(cfg runner.TaskConfig) (string, error) {
	if cfg.OutputDir == "" || cfg.Limits.OutputBytes <= 0 {
		return cfg.OutputDir, nil
	}
	uid, gid, ok := parseUser(e.user)
	if !ok {
		uid, gid = -1, -1
	}
	mounted, err := runner.MountOutputLimit(outputStage(cfg), cfg.Limits.OutputBytes, uid, gid)
	if err != nil || !mounted {
		return cfg.OutputDir, err
	}
	return outputStage(cfg), nil
}

// collectOutput brings a finished task's staged output into its output folder (once: the
// stage is gone after), or checks the size of an unstaged one.
func (e *Executor) collectOutput(cfg runner.TaskConfig) error {
	if cfg.OutputDir == "" || cfg.Limits.OutputBytes <= 0 {
		return nil
	}
	stage := outputStage(cfg)
	if runner.OutputMounted(stage) {
		if err := runner.CollectOutput(stage, cfg.OutputDir, cfg.Limits.OutputBytes, runner.OutputFull(stage)); err != nil {
			return err
		}
		return runner.UnmountOutputLimit(stage)
	}
	if _, err := os.Lstat(stage); err == nil {
		// A stage that is no longer a mount: the node rebooted and the output is lost.
		_ = os.RemoveAll(stage)
		return runner.WriteOutputReport(cfg.OutputDir, &runner.OutputReport{LimitBytes: cfg.Limits.OutputBytes, Truncated: true,
			Refused: []runner.RefusedEntry{{Name: ".", Reason: "the output's size-limited mount was lost (a reboot while the agent ran)"}}})
	}
	return runner.CheckOutputSize(cfg.OutputDir, cfg.Limits.OutputBytes)
}
