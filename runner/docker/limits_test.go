package docker

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/spec with the current output")

// renderSpec prints the isolation-relevant parts of a container spec, one fact per line.
func renderSpec(cfg runner.TaskConfig, init bool) string {
	cc, hc, err := containerSpec(cfg, DefaultUser, DefaultTmpfsBytes, init)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("image: %s", cc.Image)
	p("user: %s", cc.User)
	p("entrypoint: %q cmd: %q", cc.Entrypoint, cc.Cmd)
	p("workdir: %s", cc.WorkingDir)
	for _, e := range cc.Env {
		p("env: %s", e)
	}
	var labels []string
	for k, v := range cc.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	p("labels: %s", strings.Join(labels, " "))
	p("network: %s", hc.NetworkMode)
	p("readonly-rootfs: %v privileged: %v", hc.ReadonlyRootfs, hc.Privileged)
	p("cap-drop: %v cap-add: %v", hc.CapDrop, hc.CapAdd)
	p("security-opt: %v", hc.SecurityOpt)
	p("ipc: %s init: %v", hc.IpcMode, hc.Init != nil && *hc.Init)
	p("tmpfs: %v", hc.Tmpfs)
	p("log: %s max-size=%s max-file=%s", hc.LogConfig.Type, hc.LogConfig.Config["max-size"], hc.LogConfig.Config["max-file"])
	for _, m := range hc.Mounts {
		p("mount: %s <- %s readonly=%v", m.Target, m.Source, m.ReadOnly)
	}
	pids := "none"
	if hc.PidsLimit != nil {
		pids = fmt.Sprint(*hc.PidsLimit)
	}
	p("memory: %d swap: %d nano-cpus: %d pids: %s", hc.Memory, hc.MemorySwap, hc.NanoCPUs, pids)
	for _, d := range hc.DeviceRequests {
		p("devices: driver=%s ids=%v caps=%v count=%d", d.Driver, d.DeviceIDs, d.Capabilities, d.Count)
	}
	if len(hc.DeviceRequests) == 0 {
		p("devices: none")
	}
	return b.String()
}

// TestContainerSpec is a text test: testdata/spec holds cases, each a TaskConfig as JSON
// (optionally preceded by "noinit"), a line "----", and the rendered spec, then a blank line.
func TestContainerSpec(t *testing.T) {
	path := filepath.Join("testdata", "spec")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cases := strings.Split(strings.TrimSpace(string(data)), "\n\n\n")
	for i, c := range cases {
		input, want, ok := strings.Cut(c, "\n----")
		if !ok {
			t.Fatalf("case %d: no ---- line", i)
		}
		init := true
		js := input
		if rest, ok := strings.CutPrefix(input, "noinit\n"); ok {
			init, js = false, rest
		}
		var cfg runner.TaskConfig
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got := renderSpec(cfg, init)
		if *rewrite {
			fmt.Fprintf(&out, "%s\n----\n%s\n\n", input, got)
			continue
		}
		if strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("case %d (%s):\ngot:\n%s\nwant:\n%s", i, cfg.ID, got, want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimSpace(out.String())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"run-1.agent", "evalmesh-run-1.agent"},
		{"bafy/agent:1", "evalmesh-bafy_agent_1-" + nameHash("bafy/agent:1")},
		{"bafy_agent_1", "evalmesh-bafy_agent_1"},
		{"-x", "evalmesh-_x-" + nameHash("-x")},
	} {
		if got := ContainerName(tc.id); got != tc.want {
			t.Errorf("ContainerName(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
	if ContainerName("a/b") == ContainerName("a_b") {
		t.Error("distinct IDs share a container name")
	}
}

func nameHash(id string) string {
	n := ContainerName(id)
	return n[strings.LastIndexByte(n, '-')+1:]
}

// A run's attested limits follow what the engine can enforce: a rootless engine on cgroup v1
// cannot, whatever the task asks.
func TestEngineLimits(t *testing.T) {
	for _, tc := range []struct {
		info EngineInfo
		want string
	}{
		{EngineInfo{CgroupVersion: "2"}, "cgroup2"},
		{EngineInfo{CgroupVersion: "2", Rootless: true}, "cgroup2"},
		{EngineInfo{CgroupVersion: "1"}, "cgroup1"},
		{EngineInfo{Name: EnginePodman, CgroupVersion: "1", Rootless: true}, "none"},
		{EngineInfo{}, "none"},
	} {
		if got := tc.info.Limits(); got != tc.want {
			t.Errorf("%+v: Limits() = %q, want %q", tc.info, got, tc.want)
		}
	}
}
