package netnshosts

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestBlocks(t *testing.T) {
	page := "# Title\n\n```sh\n# harness: lab\nevalmesh lab init\n```\n\n```sh\necho for people\n```\n\n```yaml\n# harness: lab\nnot: sh\n```\n\n```sh\n# harness: node\na\nb\n```\n"
	got := Blocks([]byte(page))
	if len(got) != 2 {
		t.Fatalf("got %d blocks, want the 2 marked sh blocks: %+v", len(got), got)
	}
	if got[0].Role != "lab" || got[0].Line != 3 || got[0].Text != "# harness: lab\nevalmesh lab init\n" {
		t.Errorf("first block %+v", got[0])
	}
	if got[1].Role != "node" || got[1].Text != "# harness: node\na\nb\n" {
		t.Errorf("second block %+v", got[1])
	}
}

// Two hosts reach each other over the bridge, not once the link is down, again once it is
// up; nothing of theirs is visible in the root namespace, and all is gone after cleanup.
func TestHostsLinkAndCleanup(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("netnshosts: %v", err)
	}
	var nt *Net
	t.Run("hosts", func(t *testing.T) {
		nt = New(t, 2)
		a, b := nt.Hosts[0], nt.Hosts[1]
		if out, err := exec.Command("ip", "-o", "addr").Output(); err != nil || strings.Contains(string(out), Subnet+".") {
			t.Fatalf("the root namespace has a hosts' address (or ip failed: %v):\n%s", err, out)
		}
		dial := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := a.DialContext(ctx, "tcp", net.JoinHostPort(b.Addr, "22"))
			if c != nil {
				c.Close()
			}
			return err
		}
		// Nothing listens on b:22: reachable means "connection refused", unreachable a timeout.
		if err := dial(); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial from h1 to h2 over the bridge: %v (want connection refused)", err)
		}
		a.LinkDown()
		if err := dial(); err == nil || strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial with h1's link down: %v (want a timeout)", err)
		}
		a.LinkUp()
		if err := dial(); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial after the link is up again: %v (want connection refused)", err)
		}
	})
	for _, ns := range listNamespaces() {
		if strings.HasPrefix(ns, nt.id) {
			t.Errorf("namespace %s left after cleanup", ns)
		}
	}
}
