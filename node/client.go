package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/api"
)

// ErrNoDaemon is wrapped when no daemon answers for a home.
var ErrNoDaemon = errors.New("no evalmesh daemon is running")

// ErrUnauthorized is wrapped when the daemon refuses the client's token (401).
var ErrUnauthorized = errors.New("the daemon refused this client's API token")

// Client talks to a running daemon's HTTP API. The CLI uses it; so can scripts and tests.
// Every request goes through do, which sends the API token: a method added for a new
// endpoint calls Call, call, streamCall or do and is authorised with no more code.
//
//	c, err := node.NewClient(h)          // reads HOME/api and HOME/api.token
//	root, err := c.Add(ctx, "/abs/dir", false, nil)
//	err = c.Get(ctx, root, "/abs/out", func(done, total int64) { ... })
type Client struct {
	base  string
	token string
	home  home.Home
	hc    *http.Client
}

// NewClient reads the API address and token the daemon of home h wrote to HOME/api and
// HOME/api.token. It does not contact the daemon; the first call does, and fails with
// ErrNoDaemon if none answers.
func NewClient(h home.Home) (*Client, error) {
	raw, err := os.ReadFile(h.APIPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noDaemon(h)
	}
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(h.APITokenPath())
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("cannot read the API token %s: %w (only the account that runs the daemon of home %s may use its API)", h.APITokenPath(), err, h.Dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// A missing token file (a daemon still starting, or one of an older version) is sent
	// as no token: the daemon's 401 then says what to do.
	return NewClientAddr(h, strings.TrimSpace(string(raw)), strings.TrimSpace(string(token))), nil
}

// NewClientAddr talks to the API at host:port with the bearer token.
func NewClientAddr(h home.Home, addr, token string) *Client {
	return &Client{base: "http://" + addr + strings.TrimSuffix(api.Prefix, "/"), token: token, home: h, hc: &http.Client{}}
}

// WithDialer returns a copy of c whose connections to the API are opened by dial. A test
// harness reaches this way a daemon whose API listens on the loopback of another network
// namespace (internal/netnshosts); the CLI never needs it.
func (c *Client) WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	cp := *c
	cp.hc = &http.Client{Transport: &http.Transport{DialContext: dial}}
	return &cp
}

func noDaemon(h home.Home) error {
	return fmt.Errorf("%w for home %s: start it with `evalmesh daemon --home %s`", ErrNoDaemon, h.Dir, h.Dir)
}

// do POSTs body (of media type ctype) to the endpoint path with the API token and returns
// the answer when it is 200; any other status becomes an error with the daemon's message.
func (c *Client) do(ctx context.Context, path string, body io.Reader, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial") {
			return nil, noDaemon(c.home)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e api.ErrorBody
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			if resp.StatusCode == http.StatusUnauthorized {
				return nil, fmt.Errorf("%w: %s", ErrUnauthorized, e.Error)
			}
			return nil, errors.New(e.Error)
		}
		return nil, fmt.Errorf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	return resp, nil
}

// Call POSTs in as JSON to the endpoint path (relative to /api/v0/, e.g. "pin/ls") and
// decodes the JSON answer into out (nil: discard it).
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.call(ctx, path, in, out)
}

func (c *Client) call(ctx context.Context, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	resp, err := c.do(ctx, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// streamCall reads an Event stream, passing progress events to on, and returns the final CID.
func (c *Client) streamCall(ctx context.Context, path string, in any, on func(Event)) (string, error) {
	e, err := c.streamEvents(ctx, path, in, on)
	return e.CID, err
}

// streamEvents reads an Event stream, passing progress events to on, and returns the final
// (Done) event.
func (c *Client) streamEvents(ctx context.Context, path string, in any, on func(Event)) (Event, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return Event{}, err
	}
	resp, err := c.do(ctx, path, bytes.NewReader(raw), "application/json")
	if err != nil {
		return Event{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return Event{}, fmt.Errorf("daemon sent a malformed event %q: %w", sc.Text(), err)
		}
		switch {
		case e.Error != "":
			return Event{}, errors.New(e.Error)
		case e.Done:
			return e, nil
		case on != nil:
			on(e)
		}
	}
	if err := sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, errors.New("the daemon ended the answer early (did it stop? see its log)")
}

// PinSurvey returns the daemon's last repair round.
func (c *Client) PinSurvey(ctx context.Context) (*PinSurvey, error) {
	var out PinSurvey
	return &out, c.call(ctx, "pin/ledger", struct{}{}, &out)
}

// PinStatus asks the daemon who holds c (pins.Keeper.PinStatus).
func (c *Client) PinStatus(ctx context.Context, root cid.Cid) (*PinStatusReport, error) {
	var out PinStatusReport
	return &out, c.call(ctx, "pin/status", api.PinStatusRequest{CID: root.String()}, &out)
}

// GC runs garbage collection on the daemon (see pins.Keeper.GC); progress gets each phase's events.
func (c *Client) GC(ctx context.Context, dryRun bool, progress func(phase string, done, total int64)) (*GCReport, error) {
	e, err := c.streamEvents(ctx, "repo/gc", api.GCRequest{DryRun: dryRun}, func(e Event) {
		if progress != nil {
			progress(e.Phase, e.Bytes, e.Total)
		}
	})
	if err != nil {
		return nil, err
	}
	if e.GC == nil {
		return nil, errors.New("the daemon's repo/gc answer has no report")
	}
	return e.GC, nil
}

// ID returns the daemon's peer ID and listening addresses.
func (c *Client) ID(ctx context.Context) (*IDInfo, error) {
	var out IDInfo
	return &out, c.call(ctx, "id", struct{}{}, &out)
}

// Peers lists connected peers.
func (c *Client) Peers(ctx context.Context) ([]PeerInfo, error) {
	var out []PeerInfo
	return out, c.call(ctx, "peers", struct{}{}, &out)
}

// Connect dials a peer (multiaddr ending in /p2p/PEER_ID).
func (c *Client) Connect(ctx context.Context, addr string) error {
	return c.call(ctx, "connect", api.ConnectRequest{Addr: addr}, nil)
}

// Pins lists recursive pins.
func (c *Client) Pins(ctx context.Context) ([]PinInfo, error) {
	var out []PinInfo
	return out, c.call(ctx, "pin/ls", struct{}{}, &out)
}

// KnownPeers lists the peers the daemon re-dials, connected or not.
func (c *Client) KnownPeers(ctx context.Context) ([]KnownPeer, error) {
	var out []KnownPeer
	return out, c.call(ctx, "peers/known", struct{}{}, &out)
}

// Pin fetches root's DAG from peers if needed and pins it.
func (c *Client) Pin(ctx context.Context, root cid.Cid, name string, progress func(done, total int64)) error {
	_, err := c.PinFetch(ctx, root, name, progress)
	return err
}

// PinFetch is Pin that also returns what the daemon's fetch kept of an interrupted earlier
// one (zero when it did not resume).
func (c *Client) PinFetch(ctx context.Context, root cid.Cid, name string, progress func(done, total int64)) (FetchReport, error) {
	e, err := c.streamEvents(ctx, "pin/add", api.PinRequest{CID: root.String(), Name: name}, func(e Event) {
		if progress != nil && e.Phase == "fetch" {
			progress(e.Bytes, e.Total)
		}
	})
	return keptReport(e), err
}

func keptReport(e Event) FetchReport {
	return FetchReport{KeptBlocks: e.KeptBlocks, KeptBytes: e.KeptBytes, Total: e.Total}
}

// Unpin removes root's recursive pin.
func (c *Client) Unpin(ctx context.Context, root cid.Cid) error {
	return c.call(ctx, "pin/rm", api.PinRequest{CID: root.String()}, nil)
}

// Add packs, stores and pins the folder dir (resolved to an absolute path here).
func (c *Client) Add(ctx context.Context, dir string, unchecked bool, progress func(done int64)) (cid.Cid, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return cid.Undef, err
	}
	s, err := c.streamCall(ctx, "task/add", api.AddRequest{Dir: abs, Unchecked: unchecked}, func(e Event) {
		if progress != nil {
			progress(e.Bytes)
		}
	})
	if err != nil {
		return cid.Undef, err
	}
	return cid.Decode(s)
}

// Get fetches, pins and unpacks the bundle root into dir (resolved to an absolute path here).
// progress gets fetch progress; unpacking, if set, is called when unpacking starts.
func (c *Client) Get(ctx context.Context, root cid.Cid, dir string, progress func(done, total int64), unpacking func()) error {
	return c.GetTimeout(ctx, root, dir, 0, progress, unpacking)
}

// GetTimeout is Get that gives up once no block has arrived for timeout (0: the daemon's
// default stall timeout).
func (c *Client) GetTimeout(ctx context.Context, root cid.Cid, dir string, timeout time.Duration, progress func(done, total int64), unpacking func()) error {
	_, err := c.GetFetch(ctx, root, dir, timeout, progress, unpacking)
	return err
}

// GetFetch is GetTimeout that also returns what the daemon's fetch kept of an interrupted
// earlier one (zero when it did not resume).
func (c *Client) GetFetch(ctx context.Context, root cid.Cid, dir string, timeout time.Duration, progress func(done, total int64), unpacking func()) (FetchReport, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return FetchReport{}, err
	}
	last, err := c.streamEvents(ctx, "task/get", api.GetRequest{CID: root.String(), Dir: abs, TimeoutSeconds: timeout.Seconds()}, func(e Event) {
		switch {
		case e.Phase == "fetch" && progress != nil:
			progress(e.Bytes, e.Total)
		case e.Phase == "unpack" && unpacking != nil:
			unpacking()
		}
	})
	return keptReport(last), err
}

// ExportCAR writes root's DAG (which the daemon must hold) to w as a CARv1.
func (c *Client) ExportCAR(ctx context.Context, root cid.Cid, w io.Writer) error {
	resp, err := c.do(ctx, "dag/export?cid="+url.QueryEscape(root.String()), nil, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("export %s: %w", root, err)
	}
	if e := resp.Trailer.Get("X-Evalmesh-Error"); e != "none" {
		if e == "" {
			e = "the daemon ended the CAR early"
		}
		return fmt.Errorf("export %s: %s", root, e)
	}
	return nil
}

// ImportCAR sends a CAR to the daemon, which stores its blocks and pins its roots.
func (c *Client) ImportCAR(ctx context.Context, r io.Reader) ([]cid.Cid, error) {
	resp, err := c.do(ctx, "dag/import", r, "application/vnd.ipld.car")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.ImportResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	var roots []cid.Cid
	for _, s := range out.Roots {
		c, err := cid.Decode(s)
		if err != nil {
			return nil, err
		}
		roots = append(roots, c)
	}
	return roots, nil
}
