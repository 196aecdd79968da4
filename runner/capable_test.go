package runner

import (
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"
)

// Each rule of CheckRunnable refuses what it names and passes what the node can run.
func TestCheckRunnable(t *testing.T) {
	process := Capabilities{Executor: "process", Programs: map[string]bool{"/bin/agent": true}}
	docker := Capabilities{Executor: "docker", Images: map[string]bool{"sha256:aa": true}, GPUs: 2}
	slurm := Capabilities{Executor: "slurm", GPUs: 1} // images unknown here
	for _, tc := range []struct {
		name     string
		spec     agentspec.Spec
		taskGPUs int
		caps     Capabilities
		want     string // "" runnable, else a fragment of the reason
	}{
		{"process runs evalmesh agents", agentspec.Spec{Name: "a", Command: []string{"evalmesh", "agent", "x"}}, 0, process, ""},
		{"process runs a host program", agentspec.Spec{Name: "a", Command: []string{"/bin/agent"}}, 0, process, ""},
		{"process lacks a container's program", agentspec.Spec{Name: "a", Image: "sha256:aa", Command: []string{"/agent"}}, 0, process, `command "/agent" is not on this host`},
		{"docker needs an image", agentspec.Spec{Name: "a", Command: []string{"evalmesh", "agent", "x"}}, 0, docker, "has no image"},
		{"docker has the image", agentspec.Spec{Name: "a", Image: "sha256:aa", Command: []string{"/agent"}}, 0, docker, ""},
		{"docker lacks the image", agentspec.Spec{Name: "a", Image: "sha256:bb", Command: []string{"/agent"}}, 0, docker, "not on this node's engine"},
		{"docker can fetch the image", agentspec.Spec{Name: "a", Image: "sha256:bb", ImageCID: "bafy", Command: []string{"/agent"}}, 0, docker, ""},
		{"slurm: images not known here", agentspec.Spec{Name: "a", Image: "sha256:bb", Command: []string{"/agent"}}, 1, slurm, ""},
		{"task GPUs over the node's", agentspec.Spec{Name: "a", Image: "sha256:aa", Command: []string{"/agent"}}, 3, docker, "needs 3 GPUs"},
		{"agent GPUs over the node's", agentspec.Spec{Name: "a", Command: []string{"evalmesh"}, Resources: agentspec.Resources{GPUs: 1}}, 0, process, "needs 1 GPUs"},
		{"model GPUs over the node's", agentspec.Spec{Name: "a", Image: "sha256:aa", Command: []string{"/agent"}, Model: &agentspec.Model{GPUs: 4}}, 1, docker, "needs 4 GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRunnable(&tc.spec, tc.taskGPUs, tc.caps)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}
