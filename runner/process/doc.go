// Package process is the development executor: each task is a local subprocess. It exists so
// evalmesh can be tried without Docker or GPUs and so tests run at CI speed; it is NOT an
// isolation boundary (runs are attested with isolation "process"): the agent sees the
// filesystem its uid can read. What it does to narrow that:
//   - sandbox: an agent task (one with a PublicDir) runs in a fresh folder of its own,
//     Options.SandboxDir/<task>/ (default $TMPDIR/evalmesh-agents), laid out like the
//     docker executor's mounts: public/ (a copy; hard links when the agent runs under another
//     uid and cannot write the files), task/prompt.md, workspace/ and output/. The
//     EVALMESH_* variables point there, so $EVALMESH_PUBLIC/.. holds nothing but the agent's
//     own folders and nothing names the bundle or its private/. output/ is copied (folders
//     and regular files only, never following the agent's links) into TaskConfig.OutputDir
//     when Wait sees the task end, or at Destroy; Destroy removes the sandbox;
//   - uid: on a root node an agent runs as Options.UID:GID (default 65534:65534, nobody),
//     supervisor included, with no supplementary groups, when that uid can reach the agent's
//     program (else as the node's uid; the handle's driver state says why: uid_note). Its
//     status file is then <sandbox>/<task>.exit, handed to that uid beforehand. An evaluator
//     runs as the node: it reads private/.
//
// Containment (runner.ContainmentReporter) reports isolation "process", the limits as applied
// ("cgroup1" when any cgroup was made, else "rlimit" when RLIMIT_DATA stood in for memory,
// else "none"; cgroup v2 is not used) and whether the uid was separate.
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
