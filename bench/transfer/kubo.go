package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// kuboBin is a prebuilt kubo `ipfs` binary (-kubo); the bench never builds or fetches one.
var kuboBin string

// kubo is a running `ipfs daemon` with its own repo, configured to stay on 127.0.0.1.
type kubo struct {
	repo string
	cmd  *exec.Cmd
}

func kuboCmd(repo string, args ...string) *exec.Cmd {
	c := exec.Command(kuboBin, args...)
	c.Env = append(os.Environ(), "IPFS_PATH="+repo, "IPFS_TELEMETRY=off")
	return c
}

func kuboRun(repo string, args ...string) (string, error) {
	out, err := kuboCmd(repo, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ipfs %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func startKubo(repo string) (*kubo, error) {
	os.RemoveAll(repo)
	os.MkdirAll(filepath.Dir(repo), 0o755)
	// The test profile: loopback listen addresses, no bootstrap peers, no mDNS, no NAT
	// port mapping, no AutoTLS or AutoConf; routing off and telemetry off on top.
	if _, err := kuboRun(repo, "init", "--profile", "test", "-e"); err != nil {
		return nil, err
	}
	for _, kv := range [][2]string{
		{"Routing.Type", `"none"`},
		{"Swarm.RelayClient.Enabled", "false"},
		{"Swarm.RelayService.Enabled", "false"},
		{"Plugins.Plugins.telemetry.Config.Mode", `"off"`},
	} {
		if _, err := kuboRun(repo, "config", "--json", kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	k := &kubo{repo: repo, cmd: kuboCmd(repo, "daemon")}
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	k.cmd.Stderr = k.cmd.Stdout
	if err := k.cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Daemon is ready") {
			go func() {
				for sc.Scan() {
				}
			}()
			return k, nil
		}
	}
	k.stop()
	return nil, fmt.Errorf("ipfs daemon in %s exited before it was ready", repo)
}

func (k *kubo) stop() {
	k.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { k.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		k.cmd.Process.Kill()
		<-done
	}
}

func (k *kubo) cpu() time.Duration { return procCPU(k.cmd.Process.Pid) }

// kuboRows is daemonRows for two kubo daemons: `ipfs add -r --cid-version=1` on A, then
// `ipfs pin add` on B, which fetches over bitswap. Run once: it is slow and only a reference.
func kuboRows(dir, set, src string) (add, get row, err error) {
	ra, rb := filepath.Join(dir, "kubo", "a"), filepath.Join(dir, "kubo", "b")
	defer os.RemoveAll(filepath.Join(dir, "kubo"))
	ka, err := startKubo(ra)
	if err != nil {
		return add, get, err
	}
	defer ka.stop()
	kb, err := startKubo(rb)
	if err != nil {
		return add, get, err
	}
	defer kb.stop()
	addrs, err := kuboRun(ra, "id", "-f", "<addrs>")
	if err != nil {
		return add, get, err
	}
	id, err := kuboRun(ra, "id", "-f", "<id>")
	if err != nil {
		return add, get, err
	}
	addr := strings.Fields(addrs)[0]
	if !strings.Contains(addr, "/p2p/") {
		addr += "/p2p/" + id
	}
	if _, err := kuboRun(rb, "swarm", "connect", addr); err != nil {
		return add, get, err
	}
	both := func() time.Duration { return ka.cpu() + kb.cpu() }

	c0, t0 := both(), time.Now()
	root, err := kuboRun(ra, "add", "-r", "--cid-version=1", "-Q", src)
	if err != nil {
		return add, get, err
	}
	add = row{set: set, path: "2 kubo daemons: ipfs add", store: "kubo", wall: time.Since(t0), cpu: both() - c0}
	c0, t0 = both(), time.Now()
	if _, err := kuboRun(rb, "pin", "add", "--progress=false", root); err != nil {
		return add, get, err
	}
	get = row{set: set, path: "2 kubo daemons: ipfs pin add (bitswap)", store: "kubo", wall: time.Since(t0), cpu: both() - c0}
	return add, get, nil
}
