// Package docker is the production executor: each task runs in its own container on the
// local Docker engine, with the bundle's public/ folder read-only, an empty workspace and an
// output folder, the assigned GPUs by UUID, no network unless the task allows it, a read-only
// root filesystem, every capability dropped, no-new-privileges, memory / CPU / pids limits,
// a small tmpfs at /tmp, and the task's wall-clock limit enforced by Wait. A task may join
// another task's network namespace (TaskConfig.JoinNetworkOf: network mode container:<name>,
// the agent beside its model, whose own mode is none), and Exec runs a command inside a
// running task (the model's readiness probe; runner.StartModel).
//
// The executor never pulls: images come from the local engine by reference or digest, or are
// loaded from a `docker save` tar with LoadImage. It keeps no state of its own: a task's
// container is named after TaskConfig.ID and labelled, so Recover finds it again from a saved
// Handle after the node restarts, and the container's own log (json-file) is copied into
// TaskConfig.LogPath from its beginning each time Wait attaches, so the log file ends up
// complete even when the node was killed mid-run.
package docker
