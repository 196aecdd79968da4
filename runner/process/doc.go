// Package process is the development executor: each task is a local subprocess. It exists so
// evalmesh can be tried without Docker or GPUs and so tests run at CI speed; it is NOT an
// isolation boundary. The agent runs as the node's user and sees the whole filesystem the
// node sees; only the folder layout (passed in EVALMESH_* variables instead
// of mounts) matches the docker executor.
//
// What is enforced:
//   - network: a task without TaskConfig.Network gets a network namespace of its own with
//     only lo, when the node runs as root with CAP_SYS_ADMIN; otherwise it shares the host's
//     network, and its handle's driver state says "network_isolated": false;
//   - wall clock: Wait kills the task's whole process group at Handle.Deadline (TimedOut);
//   - memory: a cgroup v1 memory group when /sys/fs/cgroup/memory is writable (the kernel
//     OOM-kills the agent and Wait reports OOMKilled); otherwise RLIMIT_DATA, which bounds
//     writable private memory (not address space: RLIMIT_AS would stop Go or CUDA programs
//     at startup) and makes allocations fail instead of killing, so OOMKilled is not
//     reported;
//   - pids: a cgroup v1 pids group when /sys/fs/cgroup/pids is writable; RLIMIT_NPROC is not
//     used because it counts every process of the user, not of the task;
//   - CPU: a cgroup v1 cpu quota when /sys/fs/cgroup/cpu is writable; otherwise not enforced.
//
// The agent runs under /bin/sh as a tiny supervisor in its own session and process group: the
// shell applies the rlimits, runs the agent, and records its exit status to a file next to
// the log, so that after a node restart Recover (by PID plus the process start time from
// /proc/PID/stat, so a reused PID is never mistaken for the task) can still report how the
// task ended. A task that died without writing that file ends with the error
// "exit status unknown after restart". The status file is "<task>.exit" in Options.StateDir
// (default: the folder of TaskConfig.LogPath); Wait rewrites it with the final ExitResult so
// every later Wait returns the same, and Destroy removes it. TaskConfig.ExtraMounts cannot be
// given to a subprocess and make Start fail.
package process
