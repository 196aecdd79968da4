// Command agent is a hostile (and a few friendly) test agents in one static binary; the first
// argument picks the behaviour. It reads its folders from the EVALMESH_* variables, so the
// same binary runs under the docker executor (as the only file of a FROM scratch image) and
// under the process executor. It never sends network traffic.
package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// First instruction: the start-latency benchmark reads this timestamp.
	start := time.Now().UnixNano()
	// (EVALMESH_MARKER set by an executor-level benchmark, or mode "marker" from an agent
	// spec, whose env may not name EVALMESH_* variables.)
	if out := os.Getenv("EVALMESH_OUTPUT"); out != "" && (os.Getenv("EVALMESH_MARKER") != "" || len(os.Args) > 1 && os.Args[1] == "marker") {
		_ = os.WriteFile(filepath.Join(out, "marker"), []byte(strconv.FormatInt(start, 10)), 0o644)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent MODE [ARGS]")
		os.Exit(64)
	}
	arg := func(i int, def string) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return def
	}
	switch os.Args[1] {
	case "marker": // wrote the marker above; nothing else
	case "exit":
		code, _ := strconv.Atoi(arg(2, "0"))
		fmt.Println("hello stdout")
		fmt.Fprintln(os.Stderr, "hello stderr")
		if out := os.Getenv("EVALMESH_OUTPUT"); out != "" {
			if err := os.WriteFile(filepath.Join(out, "submission.csv"), []byte("id,answer\n1,42\n"), 0o644); err != nil {
				fmt.Println("write submission:", err)
				os.Exit(70)
			}
		}
		os.Exit(code)
	case "sleep":
		d, err := time.ParseDuration(arg(2, "1h"))
		if err != nil {
			os.Exit(64)
		}
		fmt.Println("sleeping", d)
		time.Sleep(d)
		fmt.Println("done sleeping")
	case "env":
		var keys []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "EVALMESH_") || strings.HasPrefix(kv, "TEST_") {
				keys = append(keys, kv)
			}
		}
		sort.Strings(keys)
		for _, kv := range keys {
			fmt.Println(kv)
		}
		if b, err := os.ReadFile(os.Getenv("EVALMESH_PROMPT")); err == nil {
			fmt.Printf("prompt: %s\n", bytes.TrimSpace(b))
		}
		entries, _ := os.ReadDir(os.Getenv("EVALMESH_PUBLIC"))
		for _, e := range entries {
			fmt.Println("public:", e.Name())
		}
	case "private": // private SECRET [PATH...]: search around public/, then read each PATH
		hunt(arg(2, ""), os.Args[min(3, len(os.Args)):])
	case "netifs":
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Println("interfaces error:", err)
			os.Exit(1)
		}
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		fmt.Println("interfaces:", strings.Join(names, ","))
	case "forkbomb":
		forkbomb()
	case "alloc":
		mb, _ := strconv.Atoi(arg(2, "1024"))
		var keep [][]byte
		for i := 0; i < mb; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
			if i%64 == 0 {
				fmt.Println("allocated MiB:", i)
			}
		}
		fmt.Println("allocated all", len(keep), "MiB")
	case "writes":
		writes()
	case "term-children": // two children that ignore SIGTERM, one in a process group of its own
		termChildren()
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	case "child-of-forkbomb":
		time.Sleep(time.Hour)
	case "output": // output KIND [ARG]: a hostile submission.csv (see hostileOutput)
		hostileOutput(arg(2, ""), arg(3, ""))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(64)
	}
}

// hunt looks for the bundle's private data: a /private folder, or the secret (a string only
// the test's private/ labels contain) in any readable file.
func hunt(secret string, paths []string) {
	if _, err := os.Stat("/private"); err == nil {
		fmt.Println("private-dir: present")
	} else {
		fmt.Println("private-dir: absent")
	}
	found := ""
	files := 0
	roots := []string{"/"}
	if pub := os.Getenv("EVALMESH_PUBLIC"); pub != "" && !strings.HasPrefix(pub, "/public") {
		// Process executor: the filesystem is the host's; search around the run's folders.
		roots = []string{filepath.Dir(pub)}
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
				return filepath.SkipDir
			}
			if found != "" {
				return filepath.SkipAll
			}
			if !d.Type().IsRegular() || p == "/proc/self/exe" {
				return nil
			}
			if info, err := d.Info(); err != nil || info.Size() > 64<<20 {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			files++
			if secret != "" && bytes.Contains(b, []byte(secret)) && !strings.HasSuffix(p, "/agent") {
				found = p
			}
			return nil
		})
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			fmt.Println("read", p+": ok")
			if secret != "" && bytes.Contains(b, []byte(secret)) && found == "" {
				found = p
			}
		} else {
			fmt.Println("read", p+": denied")
		}
	}
	fmt.Println("files-read:", files)
	if found != "" {
		fmt.Println("secret-found:", found)
	} else {
		fmt.Println("secret-found: no")
	}
}

// forkbomb starts copies of itself that sleep, until the system refuses (or 2000, so a run
// without a pids limit does not take the machine down).
func forkbomb() {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	n, t0 := 0, time.Now()
	for ; n < 2000; n++ {
		cmd := exec.Command(self, "child-of-forkbomb")
		if err := cmd.Start(); err != nil {
			fmt.Printf("forkbomb: started %d, then: %v (%s in)\n", n, err, time.Since(t0).Round(time.Millisecond))
			// Like a real fork bomb, keep trying a while before giving up.
			for end := time.Now().Add(time.Second); time.Now().Before(end); {
				if exec.Command(self, "child-of-forkbomb").Start() == nil {
					fmt.Println("forkbomb: a retry succeeded")
				}
				time.Sleep(10 * time.Millisecond)
			}
			os.Exit(3)
		}
	}
	fmt.Printf("forkbomb: started %d, never refused\n", n)
}

// writes tries to write where an agent must not, and where it may.
func writes() {
	paths := []string{"/evil", "/etc/evil", "/task/evil", "/public/evil"}
	for _, env := range []string{"EVALMESH_PUBLIC", "EVALMESH_PROMPT"} {
		if v := os.Getenv(env); v != "" {
			if env == "EVALMESH_PROMPT" {
				paths = append(paths, v)
			} else {
				paths = append(paths, filepath.Join(v, "evil"))
			}
		}
	}
	paths = append(paths, "/tmp/ok")
	for _, env := range []string{"EVALMESH_WORKSPACE", "EVALMESH_OUTPUT"} {
		if v := os.Getenv(env); v != "" {
			paths = append(paths, filepath.Join(v, "ok"))
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.WriteString("written by agent\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Printf("write %s: denied (%v)\n", p, err)
		} else {
			fmt.Printf("write %s: ok\n", p)
		}
	}
}

// hostileOutput leaves a submission.csv in the output folder that an evaluator must refuse:
// "symlink TARGET" a link to TARGET; "fifo" a named pipe; "hardlink [TARGET]" a second link
// to TARGET (default: a file beside it); "fill BYTES" a good submission, then BYTES more in
// another file, writing until the limit stops it.
func hostileOutput(kind, a string) {
	out := os.Getenv("EVALMESH_OUTPUT")
	sub := filepath.Join(out, "submission.csv")
	var err error
	switch kind {
	case "symlink":
		err = os.Symlink(a, sub)
	case "fifo":
		err = syscall.Mkfifo(sub, 0o644)
	case "hardlink":
		if a == "" {
			a = filepath.Join(out, "answers.csv")
			if err = os.WriteFile(a, []byte("id,answer\n1,42\n"), 0o644); err != nil {
				break
			}
		}
		err = os.Link(a, sub)
	case "fill":
		n, _ := strconv.ParseInt(a, 10, 64)
		if err = os.WriteFile(sub, []byte("id,answer\n1,42\n"), 0o644); err != nil {
			break
		}
		var f *os.File
		if f, err = os.Create(filepath.Join(out, "fill.bin")); err != nil {
			break
		}
		buf := make([]byte, 1<<20)
		var wrote int64
		for wrote < n {
			var k int
			k, err = f.Write(buf[:min(int64(len(buf)), n-wrote)])
			wrote += int64(k)
			if err != nil {
				break
			}
		}
		f.Close()
		fmt.Printf("fill: wrote %d of %d bytes (%v)\n", wrote, n, err)
		return
	default:
		fmt.Fprintln(os.Stderr, "output: unknown kind", kind)
		os.Exit(64)
	}
	fmt.Printf("output %s: %v\n", kind, err)
}

// termChildren starts two children that ignore SIGTERM, the second in a process group of
// its own (so a signal to the agent's group misses it), prints "child pid N" for each and
// sleeps, ignoring SIGTERM itself: the hardest agent to abort short of setsid.
func termChildren() {
	signal.Ignore(syscall.SIGTERM)
	for _, ownGroup := range []bool{false, true} {
		cmd := exec.Command(os.Args[0], "ignore-term")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
		if err := cmd.Start(); err != nil {
			fmt.Println("start child:", err)
			os.Exit(70)
		}
		fmt.Println("child pid", cmd.Process.Pid)
	}
	time.Sleep(time.Hour)
}
