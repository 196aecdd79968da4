// Package slurm is the executor for a lab's cluster behind one evalmesh node: each task is a
// Slurm batch job, and the job runs the agent in a container on its compute node through
// that node's Docker engine with the docker executor's isolation (no network, read-only
// root, every capability dropped, no private/, memory / CPU / pids limits, the wall clock).
//
// Submission. Start writes the task's job folder (JobDir: spec.json and job.sh, next to the
// task's log inside the run folder) and submits job.sh with sbatch: the partition, account
// and QoS of config.yaml's runner.slurm, --gpus=N for the task's GPUs (Slurm picks which;
// GRES), --cpus-per-task and --mem from the limits, --no-requeue (a requeued job would run
// the agent twice), the lab's extra options (never one evalmesh sets itself), and a time
// limit. The handle is the job ID. job.sh execs `evalmesh slurm-job spec.json` (RunJob) on
// the compute node, which runs the container with runner/docker's own Executor (so the
// container spec is built by one function for both executors), hands it the GPUs Slurm
// granted (SLURM_JOB_GPUS, mapped to NVML UUIDs where NVML answers), reads the GPUs' NVML
// energy counters around it, stops the container when Slurm signals the job (the engine's
// containers are outside the job's cgroup, so Slurm cannot kill them itself), and writes
// record.json (how the container ended, the node, the limits, the energy) before it exits
// with the container's status.
//
// Commands, not REST. evalmesh talks to Slurm through sbatch / scontrol / scancel / sacct.
// Measured here (BenchmarkJobQuery, one job query on the one-node test cluster, the same
// run): scontrol 30–100 ms a call (fork and exec; the high end on this loaded 2-core
// machine), slurmrestd 7–9 ms, about 10× less. The commands still win for now: they ship
// with every Slurm (Debian's slurm-wlm has no slurmrestd); they need no JWT key or socket
// of their own; their text output is stable across releases while slurmrestd's paths and
// schemas change with each (v0.0.38 in 22.05, v0.0.39 in 23.02, old ones dropped); and
// slurmrestd 22.05 refuses to start without slurmdbd unless its accounting plugin is left
// out. At one query per running task per PollInterval (1 s by default) the cost is a few
// percent of a core per task; a node driving hundreds of jobs should raise PollInterval,
// and the next step there is one squeue for all of its jobs per tick (or slurmrestd).
//
// States. Wait polls `scontrol show job` until the job ends (then sacct, where accounting
// is configured, once the controller has forgotten it), and maps the state: COMPLETED and
// FAILED give the container's result from record.json; TIMEOUT is timed out; OUT_OF_MEMORY
// is OOM-killed; CANCELLED after Stop is the container's signal, CANCELLED by anyone else
// (an operator's scancel) and NODE_FAIL, BOOT_FAIL, PREEMPTED, DEADLINE, LAUNCH_FAILED are
// errors wrapping runner.ErrTaskLost that name the state and node: not the agent's doing,
// so the run fails unattested and the slot goes back to the network. A job that ended
// without record.json (the job command failed: no engine on the node, …) is an error too.
//
// Time limits. Slurm counts job time limits in whole minutes and checks them about every
// 30 s, so the exact wall clock is enforced on the compute node (the docker executor's
// deadline from the container's start: a job may queue for longer than it runs) and the
// job's --time, the wall clock plus the stop grace rounded up to minutes plus one, is the
// backstop Slurm applies should the node's enforcement fail. Handle.Deadline is the
// submission time plus the wall clock, as the runner expects; Wait does not stop a job at
// it. Options.StopGrace must stay under the cluster's KillWait (30 s by default).
//
// Recovery. The handle (job ID and job folder) is all a restarted evalmesh needs: Recover
// re-attaches to a job Slurm still has queued or running, or that ended and left its
// record; it reports ErrTaskLost for a job Slurm lost or forgot without a record, and for
// a destroyed task (Destroy cancels a live job and removes spec.json and job.sh).
//
// Accounting. Inspect of an ended job reports GPU-seconds as the GPUs Slurm allocated (its
// TRES, or what the job asked for when slurmdbd is absent and the TRES lists no GRES) times
// the job's elapsed time (queueing excluded), and energy from the compute node's NVML
// counters (record.json), else Slurm's ConsumedEnergy where AcctGatherEnergyType is set.
// The runner attests those, and the partition and node (Containment) in the executor
// block. Without slurmdbd (AccountingStorageType=accounting_storage/none) nothing is lost
// while the controller remembers the job (MinJobAge, 300 s by default) and the job's own
// record covers the rest; a cluster with slurmdbd adds sacct's record.
//
// Capacity. GPUSource lists the partition's GPUs on usable nodes (as slurm:NODE/gpuN: the
// runner allocates from them, `evalmesh gpus` shows them), and Capacity counts the runs the
// partition can start now (free GPUs, else free CPUs, capped by the QoS's MaxJobsPU), which
// the daemon re-reads so its claims follow what the cluster can start.
//
// Multi-node clusters. The compute node reads the bundle's public/ folder, the prompt and
// the job folder, and writes the workspace, the output, the log and record.json, all by the
// run folder's paths under the evalmesh home. On one machine (the tests) that is the same
// filesystem. On a real cluster the evalmesh home's runs/ folder and the bundles it runs
// must be on a filesystem the compute nodes mount at the same path (NFS, Lustre, GPFS, as
// Slurm sites already have for home folders), and `evalmesh` must be installed at the same
// path on the compute nodes (Options.JobCommand otherwise). That is what this executor
// chose over staging the bundle to node-local disk with sbcast and copying the output
// back: staging would need an epilog or a second job step for the copy back, and a job
// that dies mid-copy would lose the submission; a shared run folder keeps the executor's
// recovery rules (the log and the record are where the node left them). Each compute node
// needs its own Docker engine with the agent's image loaded (evalmesh never pulls), and the
// engine's nvidia runtime for GPU jobs. The private/ folder is never mounted into an agent's
// container; an evaluator job reads a copy of it in the run folder, as with docker.
//
// Concurrency: an Executor is safe for concurrent use on distinct handles; it keeps no
// state of its own besides its options (everything is in Slurm and the job folder).
package slurm
