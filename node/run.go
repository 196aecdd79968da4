package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/api"
)

// Run is the daemon: it starts a node for home h, serves the HTTP API, writes a fresh API
// token to HOME/api.token (0600) and the API's address to HOME/api (as kubo does, so the CLI
// finds it), and runs until ctx ends. Then it stops taking requests, lets running ones finish
// for a few seconds, removes both files and closes the stores, so nothing acknowledged is
// lost. ready, if set, is called once the API answers.
//
// HOME/api and HOME/api.token left by a daemon that was killed are removed before the
// stores are opened, so a start that fails (a full disk, a bad config) leaves no address
// that the CLI would try.
func Run(ctx context.Context, h home.Home, opts Options, ready func(n *Node, apiAddr string)) error {
	if err := removeStaleAPI(ctx, h); err != nil {
		return err
	}
	n, err := New(ctx, h, opts)
	if err != nil {
		return err
	}
	defer n.Close()
	if opts.Mesh != nil {
		mo, err := opts.Mesh(n)
		if err != nil {
			return err
		}
		if mo != nil {
			m, err := StartMesh(ctx, n, *mo)
			if err != nil {
				return err
			}
			n.setMesh(m)
			defer m.Close()
			stopRepair := n.pins.Start(ctx)
			defer stopRepair()
		}
	}
	ln, err := net.Listen("tcp", n.cfg.API)
	if err != nil {
		return fmt.Errorf("API address %s: %w (set another with --api HOST:PORT; port 0 picks a free one)", n.cfg.API, err)
	}
	token, err := api.NewToken()
	if err != nil {
		ln.Close()
		return err
	}
	// Written before the address: a client that finds HOME/api finds the token too.
	if err := home.WriteFileAtomic(h.APITokenPath(), []byte(token+"\n"), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("write %s: %w", h.APITokenPath(), err)
	}
	defer os.Remove(h.APITokenPath())
	n.apiToken = token
	srv := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	if err := home.WriteFileAtomic(h.APIPath(), []byte(addr+"\n"), 0o600); err != nil {
		srv.Close()
		return fmt.Errorf("write %s: %w", h.APIPath(), err)
	}
	defer os.Remove(h.APIPath())
	stopDashboard := func() {}
	if opts.DashboardListen != "" {
		stop, err := n.startDashboard(opts.DashboardListen)
		if err != nil {
			srv.Close()
			return err
		}
		var once sync.Once
		stopDashboard = func() { once.Do(stop) }
		defer stopDashboard()
	}
	if ready != nil {
		ready(n, addr)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("API server: %w", err)
	}
	return shutDown(n, srv, stopDashboard)
}

// removeStaleAPI removes the HOME/api and HOME/api.token a killed daemon left; it refuses
// when a daemon still answers on that address.
func removeStaleAPI(ctx context.Context, h home.Home) error {
	if c, err := NewClient(h); err == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second) // wall clock: an HTTP call to another daemon
		_, err := c.ID(pctx)
		cancel()
		if err == nil || errors.Is(err, ErrUnauthorized) {
			return fmt.Errorf("a daemon already runs for home %s (API in %s)", h.Dir, h.APIPath())
		}
	}
	for _, p := range []string{h.APIPath(), h.APITokenPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the stale %s: %w", p, err)
		}
	}
	return nil
}

// shutDown stops Run's daemon in the order that loses nothing: the API (its requests
// finished or cancelled), the dashboard, the mesh, then the node and its stores.
func shutDown(n *Node, srv *http.Server, stopDashboard func()) error {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // wall clock: the grace an HTTP shutdown gives open requests
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	srv.Close() // cancels the requests still running; wait for their handlers to return
	n.inflight.Wait()
	stopDashboard() // its handlers read the stores
	if m := n.Mesh(); m != nil {
		m.Close() // releases its claims while the host still runs
	}
	return n.Close()
}
