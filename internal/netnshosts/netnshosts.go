// Package netnshosts builds, for a test, a few "hosts" out of Linux network namespaces: each
// host is a namespace of its own with a loopback and one veth link to a bridge, the bridge
// lives in a further namespace the test created, and every address is a private one inside
// those namespaces (10.45.0.0/24, no default route). Nothing is added to the root
// namespace: no link, no address, no route, so no packet of a test leaves them. A host's
// link can be taken down and up again (a cable pulled at the switch), commands run inside a
// host through `ip netns exec`, and a client in the test process reaches a daemon's
// loopback API in a host with DialContext.
//
// It also reads the shell blocks of a Markdown page that are marked for a harness
// (Blocks), so a test can run an operator's page as written.
//
// Names carry the test process's PID and a random suffix, so runs in parallel never
// collide; namespaces left by a killed run (their PID no longer alive) are removed by the
// next New. Everything a Net made is removed in the test's cleanup, also when it fails.
//
// Concurrency: a Net's methods may be called from several goroutines; DialContext pins its
// goroutine to an OS thread while it enters the host's namespace to open the socket.
package netnshosts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// namePrefix starts every namespace this package makes: namePrefix<pid>-<random>-<role>.
const namePrefix = "emh"

// Subnet is the hosts' network; host i (from 0) has Subnet.(i+1), a /24.
const Subnet = "10.45.0"

// Net is a bridge and the hosts linked to it.
type Net struct {
	tb     testing.TB
	id     string // namePrefix<pid>-<random>
	bridge string // the bridge's namespace
	Hosts  []*Host
}

// Host is one network namespace linked to the bridge.
type Host struct {
	Name string // a short name for logs: h1, h2, …
	NS   string // the namespace's name (ip netns)
	Addr string // its IPv4 address on the bridge, without the prefix length
	// bridgePort is the veth end in the bridge's namespace: setting it down is the cable
	// pulled at the switch, while the host keeps its own link and address.
	bridgePort string
	net        *Net
}

// Available says why hosts cannot be built here (nil when they can): not root, no `ip`,
// or a kernel or container that does not allow new network namespaces.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (run the test as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("no `ip` command (iproute2)")
	}
	probe := fmt.Sprintf("%s%d-probe", namePrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return fmt.Errorf("`ip netns add` fails here: %s", strings.TrimSpace(string(out)))
	}
	defer exec.Command("ip", "netns", "del", probe).Run()
	// A container may allow namespaces but not bridges or veth pairs (no kernel module).
	for _, args := range [][]string{
		{"-n", probe, "link", "add", "br0", "type", "bridge"},
		{"-n", probe, "link", "add", "vprobe0", "type", "veth", "peer", "name", "vprobe1"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("`ip %s` fails here: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// New builds n hosts linked to one bridge and registers their removal with tb.Cleanup. It
// fails the test when a step fails; call Available first to skip instead.
func New(tb testing.TB, n int) *Net {
	tb.Helper()
	removeLeftovers(tb)
	var rnd [3]byte
	rand.Read(rnd[:])
	nt := &Net{tb: tb, id: fmt.Sprintf("%s%d-%s", namePrefix, os.Getpid(), hex.EncodeToString(rnd[:]))}
	nt.bridge = nt.id + "-br"
	// Registered first so it runs last: after the cleanups that stop the hosts' processes.
	tb.Cleanup(nt.remove)
	nt.ip("netns", "add", nt.bridge)
	nt.ip("-n", nt.bridge, "link", "add", "br0", "type", "bridge")
	nt.ip("-n", nt.bridge, "link", "set", "br0", "up")
	for i := 0; i < n; i++ {
		h := &Host{Name: fmt.Sprintf("h%d", i+1), NS: fmt.Sprintf("%s-h%d", nt.id, i+1),
			Addr: fmt.Sprintf("%s.%d", Subnet, i+1), bridgePort: fmt.Sprintf("p%d", i+1), net: nt}
		nt.ip("netns", "add", h.NS)
		// Both ends are created inside their namespaces: the root namespace never holds them.
		nt.ip("link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", h.bridgePort, "netns", nt.bridge)
		nt.ip("-n", nt.bridge, "link", "set", h.bridgePort, "master", "br0")
		nt.ip("-n", nt.bridge, "link", "set", h.bridgePort, "up")
		nt.ip("-n", h.NS, "link", "set", "lo", "up")
		nt.ip("-n", h.NS, "addr", "add", h.Addr+"/24", "dev", "eth0")
		nt.ip("-n", h.NS, "link", "set", "eth0", "up")
		nt.Hosts = append(nt.Hosts, h)
	}
	return nt
}

// ip runs one ip command, failing the test with its output.
func (nt *Net) ip(args ...string) {
	nt.tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		nt.tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

// remove deletes every namespace of this Net; deleting a namespace deletes its links.
func (nt *Net) remove() {
	for _, h := range nt.Hosts {
		exec.Command("ip", "netns", "del", h.NS).Run()
	}
	exec.Command("ip", "netns", "del", nt.bridge).Run()
	// A namespace whose creation failed half-way is not in Hosts.
	for _, ns := range listNamespaces() {
		if strings.HasPrefix(ns, nt.id+"-") {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	}
}

// removeLeftovers deletes namespaces of this package whose process is gone (a run killed
// before its cleanup).
func removeLeftovers(tb testing.TB) {
	for _, ns := range listNamespaces() {
		rest, ok := strings.CutPrefix(ns, namePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue // its run is still going
		}
		if exec.Command("ip", "netns", "del", ns).Run() == nil {
			tb.Logf("netnshosts: removed namespace %s left by an earlier run (pid %d)", ns, pid)
		}
	}
}

func listNamespaces() []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// LinkDown takes the host's port on the bridge down: its packets to the others are lost
// from now on, as when a cable is pulled at the switch. Connections are not closed; each
// side finds out by its own timeouts.
func (h *Host) LinkDown() {
	h.net.tb.Helper()
	h.net.ip("-n", h.net.bridge, "link", "set", h.bridgePort, "down")
}

// LinkUp puts the host's port on the bridge back up.
func (h *Host) LinkUp() {
	h.net.tb.Helper()
	h.net.ip("-n", h.net.bridge, "link", "set", h.bridgePort, "up")
}

// Command returns a command that runs name with args inside the host's namespace.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// DialContext opens a connection from inside the host's namespace (to its loopback, for
// example). A socket belongs to the namespace of the thread that created it, so the
// goroutine is pinned to its thread, enters the namespace, creates and connects the socket,
// and goes back; Go's net package has no option for this, hence the hand-written setns.
// A thread that cannot go back is left locked, so Go retires it rather than reuse it.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + h.NS)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter namespace %s: %w", h.NS, err)
	}
	var d net.Dialer
	conn, dialErr := d.DialContext(ctx, network, addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return conn, dialErr // the thread stays locked and dies with this goroutine's lock
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

// Block is one shell block of a page marked for a harness.
type Block struct {
	Role string // what the first line names: "# harness: ROLE"
	Line int    // the line of the opening fence, from 1
	Text string // the block's text, the marker line included
}

// Blocks returns the ```sh blocks of a Markdown page whose first line is
// "# harness: ROLE", in page order. Unmarked blocks are for people only.
func Blocks(page []byte) []Block {
	var out []Block
	var cur *Block
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(page))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```sh":
			cur = &Block{Line: n}
			body.Reset()
		case cur != nil && trimmed == "```":
			if cur.Role != "" {
				cur.Text = body.String()
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			if body.Len() == 0 {
				// An unmarked block keeps Role "" and is skipped at its end.
				if role, ok := strings.CutPrefix(trimmed, "# harness:"); ok {
					cur.Role = strings.TrimSpace(role)
				}
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	return out
}
