package modelproxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main is the binary: `serve --listen ADDR --upstream URL --dir DIR [--max-calls N]
// [--max-body-bytes N] [--max-total-bytes N]` (the recorder, in the model's network
// namespace), `bridge --listen HOST:PORT --to PATH` (in the agent's own namespace: every
// connection to HOST:PORT is piped to the recorder's unix socket PATH), or `probe [--unix
// PATH] URL` (the readiness probe the runner execs inside these containers, which have no
// other program).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: evalmesh-model-proxy serve --listen ADDR --upstream URL --dir DIR | probe URL")
		return 2
	}
	switch args[0] {
	case "probe":
		return probe(args[1:], stderr)
	case "bridge":
		return bridge(args[1:], stderr)
	case "serve":
	default:
		fmt.Fprintf(stderr, "unknown command %q: serve, bridge or probe\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:41000", "address the agent reaches the model at (HOST:PORT, or unix:PATH)")
	upstream := fs.String("upstream", "", "the model's base address, e.g. http://127.0.0.1:8000")
	dir := fs.String("dir", "", "folder the recording is written to")
	lim := DefaultLimits
	fs.IntVar(&lim.MaxCalls, "max-calls", lim.MaxCalls, "calls recorded; later ones are forwarded and only counted")
	fs.Int64Var(&lim.MaxBodyBytes, "max-body-bytes", lim.MaxBodyBytes, "bytes stored of one body; the rest is forwarded, not stored")
	fs.Int64Var(&lim.MaxTotalBytes, "max-total-bytes", lim.MaxTotalBytes, "bytes of bodies stored in all; later bodies are not stored")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" || *dir == "" {
		fmt.Fprintf(stderr, "--upstream %q must be an http://HOST:PORT address and --dir a folder\n", *upstream)
		return 2
	}
	p, err := New(u, *dir, lim)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ln, err := listenOn(*listen)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	// On SIGTERM (the runner stopping the pod, after the agent ended) the calls in flight
	// finish and write their lines before the proxy exits.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Fprintf(stderr, "evalmesh-model-proxy: recording %s -> %s into %s\n", *listen, u, *dir)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	_ = p.Close()
	return 0
}

// listenOn listens on HOST:PORT, or on the unix socket of unix:PATH (made reachable by the
// other containers' uid).
func listenOn(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		_ = os.Remove(p)
		ln, err := net.Listen("unix", p)
		if err == nil {
			err = os.Chmod(p, 0o777)
		}
		return ln, err
	}
	return net.Listen("tcp", addr)
}

func probe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("unix", "", "reach the URL's server over this unix socket")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: evalmesh-model-proxy probe [--unix PATH] URL")
		return 2
	}
	tr := &http.Transport{}
	if *sock != "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", *sock)
		}
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: tr}
	resp, err := c.Get(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(stderr, resp.Status)
		return 1
	}
	return 0
}

// bridge pipes every TCP connection on --listen to the unix socket --to, byte for byte: the
// agent's only way to its model, which lives in another network namespace.
func bridge(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8000", "HOST:PORT the agent connects to")
	to := fs.String("to", "", "the recorder's unix socket")
	if err := fs.Parse(args); err != nil || *to == "" {
		fmt.Fprintln(stderr, "usage: evalmesh-model-proxy bridge --listen HOST:PORT --to SOCKET")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "evalmesh-model-proxy: bridging %s -> %s\n", *listen, *to)
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		go pipe(c, *to)
	}
}

func pipe(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); _ = u.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); _ = c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}
