// Package doctor owns `evalmesh doctor`: the checks that tell a lab whether its node can
// take runs, and what to fix when it cannot. Each check is a small function that returns
// one Check (name, ok/warn/fail/info, what it saw, what to do); Run puts them in a Report.
//
// The offline checks read only the home and this machine: the config and executor, the
// identity, the lab certificate (valid now, days left), the lab's draw key where the network
// document names one (HOME/draw.key), the network document or trust file,
// free disk against the block store's reserve, the Docker engine and its isolation
// features, and the GPUs NVML reports. The online checks ask the home's daemon, when its
// API answers, for its addresses, its peers and their heads (network document agreement,
// and the peers' clock offsets against ours).
// Nothing here writes to the home or starts a container.
//
// A fail means something blocks runs (the command exits 1); a warn is worth fixing but does
// not stop runs; info is a fact, never counted. Run is safe for concurrent use on distinct
// homes; a Report is not safe for concurrent mutation.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/diskstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// Status is a check's verdict.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // worth fixing; runs go on
	Fail Status = "fail" // blocks runs: the command exits 1
	Info Status = "info" // a fact, neither good nor bad (a check that cannot be made)
)

// Check is one check's result.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Fix says what to do; empty when there is nothing to do.
	Fix string `json:"fix,omitempty"`
}

// Report is every check of one home, in a fixed order.
type Report struct {
	Home string    `json:"home"`
	Time time.Time `json:"time"`
	// Daemon is whether the home's daemon answered (the online checks ran).
	Daemon   bool    `json:"daemon"`
	Fails    int     `json:"fails"`
	Warnings int     `json:"warnings"`
	Checks   []Check `json:"checks"`
}

// Failed lists the names of the checks that fail.
func (r *Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == Fail {
			out = append(out, c.Name)
		}
	}
	return out
}

func (r *Report) add(c Check) {
	r.Checks = append(r.Checks, c)
	switch c.Status {
	case Fail:
		r.Fails++
	case Warn:
		r.Warnings++
	}
}

// CertWarnBefore is how long before its expiry a certificate draws a warning.
const CertWarnBefore = 14 * 24 * time.Hour

// LowDisk is the free space under which the disk check warns: a bundle fetch or a run's
// output is likely not to fit.
const LowDisk = 1 << 30

// Options are the parts of the machine Run reads; the zero value reads the real ones.
type Options struct {
	// Now is the time certificates are checked at; zero means time.Now().
	Now time.Time
	// GPUs lists the GPUs; nil reads NVML (gpu.System).
	GPUs func() (gpu.Inventory, error)
	// Engine asks the Docker engine about itself; nil asks the one DOCKER_HOST names
	// (docker.Engine).
	Engine func(ctx context.Context) (docker.EngineInfo, error)
	// Timeout bounds each call to the daemon's API; 0 means 5 s.
	Timeout time.Duration
}

// Run makes every check of home h.
func Run(ctx context.Context, h home.Home, opts Options) *Report {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.GPUs == nil {
		opts.GPUs = func() (gpu.Inventory, error) {
			src, err := gpu.System(nil)
			if err != nil {
				return gpu.Inventory{}, err
			}
			return src.Inventory()
		}
	}
	if opts.Engine == nil {
		opts.Engine = func(ctx context.Context) (docker.EngineInfo, error) { return docker.Engine(ctx, nil) }
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	r := &Report{Home: h.Dir, Time: opts.Now.UTC()}

	cfg, err := h.Config()
	if err != nil {
		r.add(Check{Name: "config", Status: Fail, Detail: err.Error(),
			Fix: "fix the field the error names in " + h.ConfigPath() + " (`evalmesh init` on an empty folder writes a commented example)"})
		cfg = home.DefaultConfig()
	} else {
		r.add(Check{Name: "config", Status: OK, Detail: fmt.Sprintf("%s: network %s, executor %s", h.ConfigPath(), cfg.Network, cfg.Runner.Executor)})
	}
	r.add(checkIdentity(h))
	nw := loadNetwork(h, cfg)
	r.add(nw.check)
	r.add(checkExecutor(h, cfg, nw.doc))
	r.add(checkCertificate(h, nw, opts.Now))
	if c, ok := checkDrawKey(h, nw); ok {
		r.add(c)
	}
	r.add(checkDisk(h))
	for _, c := range checkEngine(ctx, cfg, opts.Engine) {
		r.add(c)
	}
	r.add(checkGPUs(cfg, opts.GPUs))
	for _, c := range checkDaemon(ctx, h, cfg, nw.doc, opts.Timeout) {
		r.add(c)
	}
	r.Daemon = slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Name == "daemon" && c.Status == OK })
	return r
}

func checkIdentity(h home.Home) Check {
	key, err := h.Identity()
	if err != nil {
		fix := "create the home with `evalmesh init --home " + h.Dir + "`"
		if !errors.Is(err, home.ErrNotInitialised) {
			fix = "restore " + h.IdentityPath() + " from a backup, or start a new node in an empty home with `evalmesh init`"
		}
		return Check{Name: "identity", Status: Fail, Detail: err.Error(), Fix: fix}
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return Check{Name: "identity", Status: Fail, Detail: err.Error(), Fix: "restore " + h.IdentityPath() + " from a backup"}
	}
	return Check{Name: "identity", Status: OK, Detail: "peer ID " + id.String()}
}

// network is what the home says about the network it joins.
type network struct {
	doc   *protocol.NetworkDoc // HOME/network.json; nil without one
	trust *attest.TrustStore   // the document's labs, else trust.yaml's; nil without either
	check Check                // the network_document check
	joins bool                 // a document or trust file exists: the daemon means to join
}

func loadNetwork(h home.Home, cfg home.Config) network {
	const name = "network_document"
	var n network
	raw, err := attest.ReadEnvelopeFile(h.NetworkDocPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		n.joins = true
		n.check = Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "make " + h.NetworkDocPath() + " readable, or get the document again from the network's labs"}
		return n
	default:
		n.joins = true
		doc, err := protocol.ParseNetworkDoc(raw)
		if err != nil {
			n.check = Check{Name: name, Status: Fail, Detail: h.NetworkDocPath() + ": " + err.Error(),
				Fix: "get the network document again from the network's labs: the daemon does not start with this one"}
			return n
		}
		if doc.Network != cfg.Network {
			n.check = Check{Name: name, Status: Fail,
				Detail: fmt.Sprintf("%s is the document of network %q, but config.yaml says network: %q", h.NetworkDocPath(), doc.Network, cfg.Network),
				Fix:    "set network: " + doc.Network + " in " + h.ConfigPath() + ", or put that network's document in place: the daemon does not start with these two"}
			return n
		}
		if n.trust, err = doc.TrustStore(); err != nil {
			n.check = Check{Name: name, Status: Fail, Detail: h.NetworkDocPath() + ": " + err.Error(), Fix: "get the network document again from the network's labs"}
			return n
		}
		n.doc = doc
		detail := fmt.Sprintf("network %s, document %s, %d lab(s), replication %d, counts %s runs",
			doc.Network, doc.Hash(), len(doc.Labs), doc.Ledger.Replication, strings.Join(doc.Ledger.Executors, "+"))
		n.check = Check{Name: name, Status: OK, Detail: detail}
		if r := doc.SignatureReport(); len(doc.Labs) >= 2 && !r.Majority {
			sign := "each lab runs `evalmesh network sign " + h.NetworkDocPath() + " --lab LABDIR` where its lab key is kept (still to sign: " + strings.Join(r.Missing, ", ") + ")"
			if doc.Signatures == nil {
				n.check = Check{Name: name, Status: Warn, Detail: detail + "; network document is not signed by a majority of its labs (no signatures: a transition, later versions refuse it)", Fix: sign}
			} else {
				n.check = Check{Name: name, Status: Fail, Detail: fmt.Sprintf("%s; not in effect: signed by %d of the %d labs needed (%s)", detail, len(r.Signers), r.Needed, strings.Join(r.Signers, ", ")),
					Fix: sign + ": the daemon does not start with it"}
			}
		} else if len(doc.Labs) >= 2 {
			n.check.Detail += "; signed by " + strings.Join(r.Signers, ", ")
		}
		return n
	}
	if _, err := os.Stat(h.TrustPath()); errors.Is(err, fs.ErrNotExist) {
		n.check = Check{Name: name, Status: Warn, Detail: "no " + home.NetworkDocFile + " and no " + home.TrustFile + ": the daemon runs alone and takes no campaign's slots",
			Fix: "put the network's document (from its labs) in " + h.NetworkDocPath()}
		return n
	}
	n.joins = true
	if n.trust, err = attest.LoadTrust(h.TrustPath()); err != nil {
		n.check = Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "fix " + h.TrustPath() + " (evalmesh trust add), or use the network's document instead"}
		return n
	}
	n.check = Check{Name: name, Status: Warn,
		Detail: fmt.Sprintf("no %s: the node joins with %s (%d lab(s)) and the ledger's default options; peers with a document compute another ledger root", home.NetworkDocFile, h.TrustPath(), len(n.trust.Labs())),
		Fix:    "put the network's document (from its labs) in " + h.NetworkDocPath()}
	return n
}

func checkExecutor(h home.Home, cfg home.Config, doc *protocol.NetworkDoc) Check {
	const name = "executor"
	ex := cfg.Runner.Executor
	var isolation string
	switch ex {
	case docker.DriverName:
		return Check{Name: name, Status: OK, Detail: "docker: each run in its own container on the local engine"}
	case "slurm":
		isolation = attest.IsolationContainer
	case "process":
		isolation = attest.IsolationProcess
	default:
		return Check{Name: name, Status: Fail, Detail: fmt.Sprintf("runner.executor %q is not docker, process or slurm", ex), Fix: "set runner.executor in " + h.ConfigPath()}
	}
	if doc != nil && !slices.Contains(doc.Ledger.Executors, isolation) {
		return Check{Name: name, Status: Fail,
			Detail: fmt.Sprintf("executor %s runs are %q, and network %s counts only %s runs: every run of this node is wasted", ex, isolation, doc.Network, strings.Join(doc.Ledger.Executors, "+")),
			Fix:    "set runner.executor: docker in " + h.ConfigPath()}
	}
	if ex == "process" {
		return Check{Name: name, Status: Warn, Detail: "process: agents run as processes with no isolation beyond the OS (they could read the task's private files)",
			Fix: "set runner.executor: docker in " + h.ConfigPath() + " for anything but development"}
	}
	return Check{Name: name, Status: OK, Detail: fmt.Sprintf("slurm: each run a batch job on partition %q", cfg.Runner.Slurm.Partition)}
}

func checkCertificate(h home.Home, n network, now time.Time) Check {
	const name = "certificate"
	self := "PEER_ID"
	if key, err := h.Identity(); err == nil {
		if id, err := peer.IDFromPrivateKey(key); err == nil {
			self = id.String()
		}
	}
	cert, err := attest.LoadNodeCert(h.CertPath())
	if errors.Is(err, fs.ErrNotExist) {
		c := Check{Name: name, Status: Warn, Detail: "no " + h.CertPath() + ": this node's attestations count only where a trust file lists the node itself",
			Fix: "ask your lab for one: evalmesh lab certify --dir LABDIR --node " + self + " --out " + h.CertPath()}
		if n.joins {
			c.Status = Fail
			c.Detail = "no " + h.CertPath() + ": the daemon does not join the network without one"
		}
		return c
	}
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "get the certificate again from your lab: evalmesh lab certify --dir LABDIR --node " + self + " --out " + h.CertPath()}
	}
	lab := cert.Lab
	if n.trust != nil {
		if name, ok := n.trust.LabName(cert.Lab); ok && name != "" {
			lab = name + " (" + cert.Lab + ")"
		}
	}
	fix := fmt.Sprintf("ask lab %s for a new certificate (evalmesh lab certify --dir LABDIR --node %s --out %s), then restart the daemon", lab, cert.Node, h.CertPath())
	switch {
	case now.After(cert.NotAfter):
		return Check{Name: name, Status: Fail, Fix: fix,
			Detail: fmt.Sprintf("certificate %s of lab %s expired at %s (%s ago): the node refuses every run", cert.ID, lab, cert.NotAfter.UTC().Format(time.RFC3339), days(now.Sub(cert.NotAfter)))}
	case now.Before(cert.NotBefore):
		return Check{Name: name, Status: Fail, Fix: "check this machine's clock; if it is right, " + fix,
			Detail: fmt.Sprintf("certificate %s of lab %s is not valid before %s (%s from now): the node refuses every run", cert.ID, lab, cert.NotBefore.UTC().Format(time.RFC3339), days(cert.NotBefore.Sub(now)))}
	}
	if key, err := h.Identity(); err == nil {
		if err := attest.CheckSigningChain(key, cert, n.trust, now); err != nil {
			return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: fix}
		}
	}
	left := cert.NotAfter.Sub(now)
	detail := fmt.Sprintf("certificate %s of lab %s, valid until %s (%s left)", cert.ID, lab, cert.NotAfter.UTC().Format(time.RFC3339), days(left))
	if left < CertWarnBefore {
		return Check{Name: name, Status: Warn, Detail: detail + ": runs that would end after it expires are refused", Fix: fix}
	}
	return Check{Name: name, Status: OK, Detail: detail}
}

// checkDrawKey checks HOME/draw.key, where the network document names a draw key for this
// node's lab (the daemon does not start without the matching file) or where the file is
// there: readable, an ed25519 key, readable by its owner alone, and the one the document
// names. ok is false where there is nothing to check (no draw key named, no file).
func checkDrawKey(h home.Home, n network) (c Check, ok bool) {
	const name = "draw_key"
	path := h.DrawKeyPath()
	lab, want := "", ""
	if cert, err := attest.LoadNodeCert(h.CertPath()); err == nil {
		lab = cert.Lab
		if n.doc != nil {
			want = n.doc.DrawKeys().Named(lab)
		}
	}
	labName := lab
	if n.trust != nil {
		if nm, ok := n.trust.LabName(lab); ok && nm != "" {
			labName = nm + " (" + lab + ")"
		}
	}
	copyFix := "copy the lab's draw key file (the --key-file `evalmesh network draw-key` wrote) to " + path + " and chmod 600 it"
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && want == "":
		return Check{}, false
	case errors.Is(err, fs.ErrNotExist):
		return Check{Name: name, Status: Fail, Fix: copyFix,
			Detail: fmt.Sprintf("the network document names draw key %s for this node's lab %s, and %s is missing: the daemon does not start", want, labName, path)}, true
	case err != nil:
		return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "make " + path + " readable by the node's user (mode 0600)"}, true
	}
	key, err := home.ReadKey(path, "draw key")
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: copyFix}, true
	}
	got, err := attest.DrawKeyString(key)
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: path + ": " + err.Error(), Fix: copyFix}, true
	}
	if want != "" && got != want {
		return Check{Name: name, Status: Fail,
			Detail: fmt.Sprintf("%s is draw key %s, but the network document names %s for this node's lab %s: the daemon does not start", path, got, want, labName),
			Fix:    "copy the lab's current draw key file to " + path + ", or name this key in the document with `evalmesh network draw-key`"}, true
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return Check{Name: name, Status: Warn,
			Detail: fmt.Sprintf("%s (draw key %s) has mode %#o: other users of this machine can read the key the lab's draws are signed with", path, got, perm),
			Fix:    "chmod 600 " + path}, true
	}
	if want == "" {
		detail := fmt.Sprintf("%s holds draw key %s, but the network document names no draw key for this node's lab %s: the node draws with its node key", path, got, labName)
		if lab == "" {
			detail = fmt.Sprintf("%s holds draw key %s; without a certificate this node's lab, and so its draw key, is unknown", path, got)
		}
		return Check{Name: name, Status: Info, Detail: detail}, true
	}
	return Check{Name: name, Status: OK, Detail: fmt.Sprintf("%s: draw key %s of lab %s, as the network document names it (mode %#o)", path, got, labName, fi.Mode().Perm())}, true
}

// days prints d in days, or hours under two days.
func days(d time.Duration) string {
	if d < 48*time.Hour {
		return fmt.Sprintf("%.0f hours", d.Hours())
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

func checkDisk(h home.Home) Check {
	const name = "disk"
	avail, reserve, err := diskstore.FreeSpace(h.Dir)
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "create the home (evalmesh init --home " + h.Dir + ")"}
	}
	detail := fmt.Sprintf("%s free on the filesystem of %s; the block store keeps a reserve of %s", mib(avail), h.Dir, mib(reserve))
	fix := "free space on that filesystem (`evalmesh repo gc` removes unpinned blocks; `evalmesh pin rm` unpins old bundles) or move the home to a larger one"
	switch {
	case avail < reserve:
		return Check{Name: name, Status: Fail, Detail: detail + ": the node refuses every block write (no bundle fetch, no task add)", Fix: fix}
	case avail < LowDisk:
		return Check{Name: name, Status: Warn, Detail: detail + fmt.Sprintf(": under %s, a bundle fetch or a run's output is likely not to fit", mib(LowDisk)), Fix: fix}
	}
	return Check{Name: name, Status: OK, Detail: detail}
}

func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%d GiB", b>>30)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// checkEngine is the engine and, when it answers, its isolation features. Only the docker
// executor runs containers here: for the others a missing engine or feature is no more
// than a warning (an info for the features).
func checkEngine(ctx context.Context, cfg home.Config, engine func(context.Context) (docker.EngineInfo, error)) []Check {
	uses := cfg.Runner.Executor == docker.DriverName
	info, err := engine(ctx)
	if err != nil {
		c := Check{Name: "engine", Status: Fail, Detail: err.Error(),
			Fix: "start the Docker engine (systemctl start docker), or point DOCKER_HOST at its socket; until then this node takes no run"}
		if !uses {
			c.Status = Warn
			c.Detail += fmt.Sprintf(" (executor %s does not use it here)", cfg.Runner.Executor)
			c.Fix = "start the Docker engine before switching runner.executor to docker"
		}
		return []Check{c}
	}
	name := info.Name
	if name == "" {
		name = docker.EngineDocker
	}
	out := []Check{{Name: "engine", Status: OK, Detail: fmt.Sprintf("%s %s at %s", name, info.Version, info.Host)}}
	feature := func(c Check) {
		if !uses && c.Status == Warn {
			c.Status = Info
			c.Detail += fmt.Sprintf(" (executor %s does not use the engine)", cfg.Runner.Executor)
		}
		out = append(out, c)
	}
	switch {
	case info.CgroupVersion == "1" && info.Rootless:
		feature(Check{Name: "cgroup", Status: Warn, Detail: "rootless engine on cgroup v1: memory, CPU and pids limits are not enforced; attestations record limits \"none\" and a network with ledger.limits \"enforced\" does not count these runs",
			Fix: "boot the host with the unified hierarchy (systemd.unified_cgroup_hierarchy=1) and delegate the controllers to the engine's user, or run the engine rootful"})
	case info.CgroupVersion == "2":
		feature(Check{Name: "cgroup", Status: OK, Detail: "cgroup v2 (" + info.CgroupDriver + "): memory, CPU and pids limits hold"})
	case info.CgroupVersion == "1":
		feature(Check{Name: "cgroup", Status: Warn, Detail: "cgroup v1 (" + info.CgroupDriver + "): limits hold, but v1 is the legacy hierarchy engines and kernels are dropping",
			Fix: "boot the host with the unified hierarchy (systemd.unified_cgroup_hierarchy=1)"})
	default:
		feature(Check{Name: "cgroup", Status: Warn, Detail: "the engine does not say which cgroup version limits runs: attestations record limits \"none\"",
			Fix: "run a Docker engine of version 20.10 or later"})
	}
	switch info.Seccomp {
	case "":
		feature(Check{Name: "seccomp", Status: Warn, Detail: "the engine has no seccomp: containers may make every system call",
			Fix: "run dockerd built with seccomp and its default profile"})
	case "unconfined":
		feature(Check{Name: "seccomp", Status: Warn, Detail: "the engine's default seccomp profile is unconfined",
			Fix: "remove seccomp-profile: unconfined from /etc/docker/daemon.json"})
	default:
		feature(Check{Name: "seccomp", Status: OK, Detail: "seccomp profile " + info.Seccomp})
	}
	switch {
	case info.Rootless:
		feature(Check{Name: "userns", Status: OK, Detail: "rootless engine: container root is an unprivileged host user"})
	case info.UserNS:
		feature(Check{Name: "userns", Status: OK, Detail: "userns-remap: container users map to unprivileged host users"})
	default:
		feature(Check{Name: "userns", Status: Warn,
			Detail: "no user namespaces (no userns-remap) and the engine is not rootless: container root is host root; runs go as uid " + docker.DefaultUser + " with every capability dropped",
			Fix:    "set \"userns-remap\": \"default\" in /etc/docker/daemon.json, or run Docker rootless"})
	}
	return out
}

func checkGPUs(cfg home.Config, inventory func() (gpu.Inventory, error)) Check {
	const name = "gpus"
	if cfg.Runner.Executor == "slurm" {
		return Check{Name: name, Status: Info, Detail: "slurm executor: runs get the partition's GPUs (evalmesh gpus lists them)"}
	}
	want := cfg.Runner.GPUs
	inv, err := inventory()
	if err != nil {
		c := Check{Name: name, Status: Warn, Detail: err.Error() + ": the node runs CPU-only", Fix: "check the NVIDIA driver (nvidia-smi)"}
		if len(want) > 0 {
			c.Status = Fail
		}
		return c
	}
	if inv.CPUOnly {
		detail := "no NVIDIA driver (" + inv.Reason + "): runs are CPU-only"
		if len(want) > 0 {
			return Check{Name: name, Status: Fail, Detail: detail + fmt.Sprintf(", but runner.gpus lists %d GPU(s)", len(want)),
				Fix: "install the NVIDIA driver (nvidia-smi must work), or empty runner.gpus in config.yaml"}
		}
		return Check{Name: name, Status: Warn, Detail: detail, Fix: "install the NVIDIA driver if this machine has GPUs; nothing to do on a CPU-only node"}
	}
	var missing []string
	for _, u := range want {
		if !slices.ContainsFunc(inv.GPUs, func(g gpu.Info) bool { return g.UUID == u }) {
			missing = append(missing, u)
		}
	}
	uuids := make([]string, len(inv.GPUs))
	for i, g := range inv.GPUs {
		uuids[i] = g.UUID
	}
	detail := fmt.Sprintf("%d GPU(s) %s, driver %s", len(inv.GPUs), inv.Model(uuids), inv.Driver)
	if len(missing) > 0 {
		return Check{Name: name, Status: Fail, Detail: detail + "; runner.gpus lists GPU(s) NVML does not report: " + strings.Join(missing, ", "),
			Fix: "list UUIDs that `evalmesh gpus` prints under runner.gpus in config.yaml"}
	}
	if len(want) > 0 {
		detail += fmt.Sprintf("; runner.gpus allows %d", len(want))
	}
	return Check{Name: name, Status: OK, Detail: detail}
}

// checkDaemon is the online checks, or one check saying why there are none.
func checkDaemon(ctx context.Context, h home.Home, cfg home.Config, doc *protocol.NetworkDoc, timeout time.Duration) []Check {
	notRunning := func(err error) []Check {
		return []Check{{Name: "daemon", Status: Warn, Detail: err.Error() + "; addresses, peers, network agreement and clock not checked",
			Fix: "start it: evalmesh daemon --home " + h.Dir}}
	}
	cl, err := node.NewClient(h)
	if err != nil {
		return notRunning(err)
	}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }
	c1, cancel := call()
	id, err := cl.ID(c1)
	cancel()
	if err != nil {
		return notRunning(err)
	}
	out := []Check{{Name: "daemon", Status: OK, Detail: "peer " + id.PeerID + " answers on its API"}}
	out = append(out, checkAddresses(cfg, id.Addrs))
	c2, cancel := call()
	peers, err := cl.Peers(c2)
	cancel()
	switch {
	case err != nil:
		out = append(out, Check{Name: "peers", Status: Warn, Detail: "the daemon does not list its peers: " + err.Error()})
	case len(peers) == 0:
		out = append(out, Check{Name: "peers", Status: Warn, Detail: "no peer connected: the node is running alone",
			Fix: "list peers under bootstrap in " + h.ConfigPath() + ", or connect one now: evalmesh connect MULTIADDR"})
	default:
		out = append(out, Check{Name: "peers", Status: OK, Detail: fmt.Sprintf("%d peer(s) connected", len(peers))})
	}
	c3, cancel := call()
	st, err := cl.LedgerStatus(c3)
	cancel()
	if err != nil {
		out = append(out, Check{Name: "network_agreement", Status: Warn, Detail: "the daemon does not say its peers' heads: " + err.Error()})
	} else {
		out = append(out, checkAgreement(h, doc, st))
		if st.ClaimingStopped != "" {
			out = append(out, Check{Name: "claiming", Status: Fail, Detail: "this node stopped claiming: " + st.ClaimingStopped,
				Fix: "fix what the last failure names (its runs' logs are under " + h.Dir + "/runs), then restart the daemon"})
		}
	}
	if err != nil {
		out = append(out, Check{Name: "clock", Status: Info, Detail: "offset against peers not measured: the daemon does not say its peers' heads"})
	} else {
		out = append(out, checkClock(st))
	}
	return out
}

// The clock check's thresholds, on the largest offset of a peer's clock against ours. Each
// offset is measured on one head (its time against when we heard it), so it includes the
// head's one-way delay: milliseconds on a LAN, up to about a second across continents.
// Under ClockWarnOffset it is noise on top of NTP-synced clocks. From it, the node's
// judgement of times others state (leases that last minutes, a dead node's missed
// renewals, witness times) may be off by a noticeable part of their span. From
// ClockFailOffset, claims and leases expire early or late by a minute and certificate
// windows are judged at the wrong moment: runs near a window's edge are refused or
// counted wrongly.
const (
	ClockWarnOffset = 5 * time.Second
	ClockFailOffset = 60 * time.Second
)

// checkClock grades the largest clock offset among peers whose heads are fresh and carry a
// time (protocol.LargestClockOffset).
func checkClock(st node.LedgerStatus) Check {
	const name = "clock"
	worst, measured := protocol.LargestClockOffset(st.Peers)
	if worst == nil {
		return Check{Name: name, Status: Info, Detail: "offset against peers unknown: no fresh peer head carries a time (none heard yet, or peers of builds whose heads' seq is a count, not their clock)"}
	}
	off := *worst.ClockOffsetSeconds
	runs := fmt.Sprintf("runs %.1f s ahead of", off)
	switch {
	case math.Abs(off) < 0.05:
		runs = "runs within 0.1 s of"
	case off < 0:
		runs = fmt.Sprintf("runs %.1f s behind", -off)
	}
	detail := fmt.Sprintf("largest offset against %d peer(s): %s (lab %s) %s this node's clock (measured on heads, good to about a second)",
		measured, worst.PeerID, orNone(worst.Lab), runs)
	const fix = "run NTP on every node (chrony or systemd-timesyncd; `chronyc tracking` or `timedatectl` shows whether the clock is synchronised), here and on that peer"
	switch d := time.Duration(math.Abs(off) * float64(time.Second)); {
	case d >= ClockFailOffset:
		return Check{Name: name, Status: Fail, Fix: fix,
			Detail: detail + fmt.Sprintf(": from %s apart, claims, leases and certificate windows are misjudged", ClockFailOffset)}
	case d >= ClockWarnOffset:
		return Check{Name: name, Status: Warn, Fix: fix,
			Detail: detail + fmt.Sprintf(": from %s apart, leases and witness times may be misjudged", ClockWarnOffset)}
	}
	return Check{Name: name, Status: OK, Detail: detail}
}

func checkAddresses(cfg home.Config, announced []string) Check {
	const name = "addresses"
	detail := fmt.Sprintf("listen %s; announced %s", strings.Join(cfg.Listen, " "), strings.Join(announced, " "))
	if len(announced) == 0 {
		return Check{Name: name, Status: Fail, Detail: detail + ": peers cannot dial this node", Fix: "set listen: in config.yaml to addresses this machine has, and restart the daemon"}
	}
	if !slices.ContainsFunc(announced, routable) && slices.ContainsFunc(cfg.Bootstrap, routable) {
		return Check{Name: name, Status: Warn, Detail: detail + ": every announced address is loopback, but bootstrap peers are on other machines and cannot dial back",
			Fix: "listen on a routable address (/ip4/0.0.0.0/tcp/4201) in config.yaml and restart the daemon"}
	}
	return Check{Name: name, Status: OK, Detail: detail}
}

// routable says whether multiaddr s is reachable from another machine (not loopback).
func routable(s string) bool {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return false
	}
	ip, err := manet.ToIP(a)
	if err != nil {
		return true // a DNS name, say: assume another machine can resolve it
	}
	return !ip.IsLoopback() && !ip.Equal(net.IPv4zero)
}

func checkAgreement(h home.Home, doc *protocol.NetworkDoc, st node.LedgerStatus) Check {
	const name = "network_agreement"
	if doc != nil && st.NetworkDoc != "" && st.NetworkDoc != doc.Hash() {
		return Check{Name: name, Status: Warn,
			Detail: fmt.Sprintf("the daemon runs network document %s, but %s is %s", st.NetworkDoc, h.NetworkDocPath(), doc.Hash()),
			Fix:    "restart the daemon so it reads the document on disk"}
	}
	if v := st.DocumentMajority; v != nil && v.Mismatch {
		return Check{Name: name, Status: Fail,
			Detail: fmt.Sprintf("network document mismatch: labs %s (a majority, by their certified nodes' heads) announce document %s, this node runs %s: it claims nothing until it runs the same", strings.Join(v.Labs, ", "), v.Majority, st.NetworkDoc),
			Fix:    "get the network document the labs signed (evalmesh network show FILE says its hash and signatures), put it in " + h.NetworkDocPath() + " and restart the daemon"}
	}
	if len(st.Peers) == 0 {
		return Check{Name: name, Status: Info, Detail: "no peer head heard yet (heads come every few seconds from connected peers of the network)"}
	}
	var other, mismatch []string
	for _, p := range st.Peers {
		switch p.Status {
		case protocol.StatusOtherDocument:
			other = append(other, fmt.Sprintf("%s (lab %s, document %s)", p.PeerID, p.Lab, p.NetworkDoc))
		case protocol.StatusRootMismatch:
			mismatch = append(mismatch, fmt.Sprintf("%s (lab %s, root %s)", p.PeerID, p.Lab, p.LedgerRoot))
		}
	}
	switch {
	case len(mismatch) > 0:
		return Check{Name: name, Status: Warn, Detail: fmt.Sprintf("ledger ROOT MISMATCH with equal sets: %s; ours is %s", strings.Join(mismatch, ", "), st.LedgerRoot),
			Fix: "compare `evalmesh ledger status` on both nodes and report it: one of them is buggy or cheating"}
	case len(other) > 0:
		return Check{Name: name, Status: Warn, Detail: fmt.Sprintf("%d of %d peer(s) run another network document than ours (%s): %s", len(other), len(st.Peers), orNone(st.NetworkDoc), strings.Join(other, ", ")),
			Fix: "agree on one network document with those labs: until then neither side counts the other's ledger root"}
	}
	return Check{Name: name, Status: OK, Detail: fmt.Sprintf("%d peer(s) heard, all under network document %s", len(st.Peers), orNone(st.NetworkDoc))}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
