package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/evalmesh/evalmesh/runner"
)

var _ runner.PodExecutor = (*Executor)(nil)

// maxExecOutput bounds what Exec keeps of a probe's output.
const maxExecOutput = 64 << 10

// Exec implements runner.PodExecutor: it runs argv inside the task's running container (as
// the task's user) and returns its exit code and up to 64 KiB of its output. This is how a
// model's readiness is probed: the model has no network, so only a process inside its
// network namespace can reach its port, and a process inside its own container needs no
// second image and no privilege on the host.
func (e *Executor) Exec(ctx context.Context, h *runner.Handle, argv []string) (int, []byte, error) {
	s, err := decodeState(h)
	if err != nil {
		return -1, nil, err
	}
	if len(argv) == 0 {
		return -1, nil, fmt.Errorf("docker executor: task %s: exec of an empty command", h.Config.ID)
	}
	created, err := e.cli.ContainerExecCreate(ctx, s.ContainerID, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, nil, fmt.Errorf("docker executor: task %s: exec %q: %w", h.Config.ID, argv[0], err)
	}
	att, err := e.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, nil, fmt.Errorf("docker executor: task %s: exec attach: %w", h.Config.ID, err)
	}
	var out bytes.Buffer
	w := &limitedWriter{w: &out, n: maxExecOutput}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(w, w, att.Reader)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return -1, out.Bytes(), ctx.Err()
	}
	att.Close()
	if err != nil && err != io.EOF {
		return -1, out.Bytes(), fmt.Errorf("docker executor: task %s: exec output: %w", h.Config.ID, err)
	}
	insp, err := e.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return -1, out.Bytes(), fmt.Errorf("docker executor: task %s: exec inspect: %w", h.Config.ID, err)
	}
	return insp.ExitCode, out.Bytes(), nil
}

// limitedWriter keeps the first n bytes and discards the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}
