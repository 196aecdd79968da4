// Package slurmtest starts a real one-node Slurm cluster for tests: Debian's slurmctld and
// slurmd (slurm-wlm) on 127.0.0.1 with a slurm.conf written into a temporary folder,
// auth/none (no munge key to manage), no accounting database (accounting_storage/none,
// jobcomp/filetxt), and two fake GPUs as GRES (gres.conf maps them to /dev/null and
// /dev/zero: Slurm grants and counts them; nothing can compute on them).
//
// One cluster serves a whole test binary: Shared starts it on first use and the binary's
// TestMain calls Stop after m.Run. Safe for concurrent use.
package slurmtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// Partition is the test cluster's one partition; Node its one node.
const (
	Partition = "evalmesh"
	Node      = "localhost"
)

// Cluster is a running test cluster.
type Cluster struct {
	Dir  string // its folder: slurm.conf, state, logs
	Conf string // the slurm.conf path (SLURM_CONF)
	ctld *exec.Cmd
	d    *exec.Cmd
}

// ErrNoSlurm means the Slurm daemons or commands are not installed.
var ErrNoSlurm = errors.New("slurm binaries (slurmctld, slurmd, sbatch, scontrol) not found: apt-get install slurm-wlm")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start writes a slurm.conf into a new temporary folder and starts slurmctld and slurmd on
// 127.0.0.1, returning once the node takes jobs.
func Start() (*Cluster, error) {
	for _, b := range []string{"slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err2 := os.Stat(filepath.Join("/usr/sbin", b)); err2 != nil {
				return nil, ErrNoSlurm
			}
		}
	}
	dir, err := os.MkdirTemp("", "evalmesh-slurm-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	ctldPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dPort, err := freePort()
	if err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`ClusterName=evalmesh-test
SlurmctldHost=%[4]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/none
CredType=cred/none
SlurmUser=%[5]s
SlurmdUser=%[5]s
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=%[1]s/jobcomp.txt
GresTypes=gpu
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
NodeName=%[4]s NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 Gres=gpu:fake:2 State=UNKNOWN
PartitionName=%[6]s Nodes=%[4]s Default=YES MaxTime=INFINITE State=UP
`, dir, ctldPort, dPort, Node, u.Username, Partition)
	gres := "Name=gpu Type=fake File=/dev/null\nName=gpu Type=fake File=/dev/zero\n"
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		return nil, err
	}
	start := func(name string, args ...string) (*exec.Cmd, error) {
		path, err := exec.LookPath(name)
		if err != nil {
			path = filepath.Join("/usr/sbin", name)
		}
		cmd := exec.Command(path, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
		out, err := os.Create(filepath.Join(dir, name+".out"))
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, cmd.Start()
	}
	if c.ctld, err = start("slurmctld", "-D", "-i", "-f", c.Conf); err != nil {
		return nil, err
	}
	if c.d, err = start("slurmd", "-D", "-N", Node, "-f", c.Conf); err != nil {
		c.Stop()
		return nil, err
	}
	err = testutil.Poll(60*time.Second, func() bool {
		out, err := c.Command("sinfo", "-h", "-o", "%T").Output()
		s := strings.TrimSpace(string(out))
		return err == nil && (s == "idle" || s == "mixed" || s == "allocated")
	})
	if err != nil {
		ctld, _ := os.ReadFile(filepath.Join(dir, "slurmctld.log"))
		d, _ := os.ReadFile(filepath.Join(dir, "slurmd.log"))
		c.stopDaemons() // the folder stays, for its logs
		return nil, fmt.Errorf("slurm test cluster in %s did not come up: %v\nslurmctld.log:\n%s\nslurmd.log:\n%s", dir, err, lastLines(ctld, 15), lastLines(d, 15))
	}
	return c, nil
}

// Command is a Slurm command against this cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	return cmd
}

// Run runs a Slurm command and returns its combined output, failing the test on an error.
func (c *Cluster) Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := c.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Stop stops both daemons (SIGTERM, then SIGKILL) and removes the cluster's folder.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.stopDaemons()
	_ = os.RemoveAll(c.Dir)
}

func (c *Cluster) stopDaemons() {
	for _, cmd := range []*exec.Cmd{c.d, c.ctld} {
		if cmd == nil || cmd.Process == nil {
			continue
		}
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Shared returns the test binary's cluster, starting it on first use; it skips the test
// when Slurm is not installed and fails it when the cluster does not come up.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	sharedOnce.Do(func() {
		if shared, sharedErr = Start(); sharedErr == nil {
			// Helper processes the tests start (a SIGKILLed node) reach the same cluster.
			sharedErr = os.Setenv("SLURM_CONF", shared.Conf)
		}
	})
	if errors.Is(sharedErr, ErrNoSlurm) {
		tb.Skipf("skipping: %v", sharedErr)
	}
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

// StopShared stops the shared cluster if one was started (TestMain, after m.Run).
func StopShared() { shared.Stop() }
