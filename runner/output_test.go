package runner_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

const testOutputLimit = 1 << 20

// A hostile agent's submission.csv, under both executors, through the whole run: a symlink
// (to the labels, to /etc/passwd), a FIFO, a hard link and an output past the task's limit
// are each an invalid submission whose reason says so, and nothing is read through them.
func TestHostileOutputsBothExecutors(t *testing.T) {
	for _, executor := range []string{"process", "docker"} {
		t.Run(executor, func(t *testing.T) {
			var r *runner.Runner
			var image, agent string
			if executor == "docker" {
				cli := executortest.DockerClient(t)
				r, _ = dockerRunner(t)
				image, agent = executortest.Image(t, cli), "/agent"
				insp, err := cli.ImageInspect(bg, image)
				if err != nil {
					t.Fatal(err)
				}
				image = insp.ID
			} else {
				r = processRunner(t, newHome(t), nil)
				agent = executortest.Binary(t)
			}
			task := copyTask(t, "arithmetic", func(y string) string {
				return strings.Replace(y, "  pids: 64\n", "  pids: 64\n  output_bytes: "+strconv.Itoa(testOutputLimit)+"\n", 1)
			})
			labels := filepath.Join(task, "private", "labels.csv")
			cases := []struct {
				name string
				args []string
				want string
			}{
				{"symlink to the labels", []string{"symlink", labels}, "is a symbolic link (to \"" + labels + "\")"},
				{"symlink to /etc/passwd", []string{"symlink", "/etc/passwd"}, "is a symbolic link (to \"/etc/passwd\")"},
				{"FIFO", []string{"fifo"}, "is a FIFO"},
				{"hard link", []string{"hardlink"}, "hard links"},
				{"past the output limit", []string{"fill", strconv.Itoa(8 * testOutputLimit)}, "output limit of " + strconv.Itoa(testOutputLimit) + " bytes"},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					spec := &agentspec.Spec{Name: "hostile", Version: "1", Image: image, Command: append([]string{agent, "output"}, c.args...)}
					o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: spec})
					if err != nil {
						t.Fatal(err)
					}
					runDir := runner.RunDir(r.Home, o.RunID)
					log, _ := os.ReadFile(filepath.Join(runDir, "logs", "agent.log"))
					if o.Valid || !strings.Contains(o.InvalidReason, c.want) {
						t.Fatalf("valid %v, reason %q; want invalid saying %q\nagent log:\n%s", o.Valid, o.InvalidReason, c.want, log)
					}
					if !strings.Contains(string(log), "output ") && !strings.Contains(string(log), "fill: ") {
						t.Fatalf("the agent did not run its hostile mode:\n%s", log)
					}
					if !strings.Contains(string(log), ": <nil>") && c.args[0] != "fill" {
						t.Fatalf("the agent could not make its hostile entry:\n%s", log)
					}
					// What the run kept of the output is bounded by the limit.
					if size := treeSize(t, filepath.Join(runDir, "output")); size > testOutputLimit+(64<<10) {
						t.Fatalf("the run's output folder holds %d bytes, over the %d-byte limit", size, testOutputLimit)
					}
					if c.args[0] == "fill" && os.Geteuid() == 0 {
						// A root node mounts the limit: the agent's writes stopped there.
						if !strings.Contains(string(log), "no space left on device") {
							t.Fatalf("the agent's writes were not cut off at the limit:\n%s", log)
						}
					}
					t.Logf("%s: %s", c.name, o.InvalidReason)
				})
			}
		})
	}
}

func treeSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
