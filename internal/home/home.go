// Package home owns the layout of a node home directory (default ~/.evalmesh): the node's
// ed25519 libp2p identity, its config file, its optional lab certificate, and the name of
// every other file and folder a home holds, though other packages write most of them. Each
// entry is spelled here once, so the packages that share an entry (the CLI and the daemon
// both read trust.yaml and network.json; the runner and the node both write attestations/)
// cannot drift apart, and this list is the whole of what a home holds.
//
// Layout (all paths relative to the home; the writer in brackets):
//
//	identity.key      libp2p-marshalled ed25519 private key, mode 0600 (never overwritten)
//	config.yaml       commented node config (see Config)
//	node-cert.json    optional: this node's certificate from its lab (attest.NodeCert)
//	trust.yaml        optional: the labs whose attestations count, when there is no network.json (the operator)
//	network.json      optional: the network document: its labs and ledger options (the operator; docs/protocol-sync.md)
//	lab-age.key       optional: the lab's age identity, to open sealed bundles' grants (the operator; attest)
//	draw.key          optional: the lab's draw key, where the network document names one (the operator; attest)
//	api               while the daemon runs: its HTTP API address (host:port) [node]
//	api.token         while the daemon runs: the API's bearer token, mode 0600 [node]
//	peers.json        the peers the daemon re-dials, rewritten atomically [node]
//	blocks/           the flat blockstore, one file per block [node]
//	blocks-pack/      the pack blockstore's segments and index [node]
//	datastore/        the datastore: pins, metadata [node]
//	store/            the verified store: campaigns and attestations by ID [node]
//	bundles/          unpacked task bundles by CID [node]
//	runs/             one folder per run [runner]
//	rescores/         one folder per re-score of a HeurekaBench run [runner]
//	attestations/     signed envelopes and grants by ID [runner, node, CLI]
//	objects/          submissions and log archives by CID [runner]
//
// Functions here are safe for concurrent use on distinct homes.
package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// EnvVar names the environment variable that selects the home when --home is not given.
const EnvVar = "EVALMESH_HOME"

// Home is a node home directory.
type Home struct{ Dir string }

// Resolve picks the home: the flag value if set, else $EVALMESH_HOME, else ~/.evalmesh.
func Resolve(flagValue string) (Home, error) {
	dir := flagValue
	if dir == "" {
		dir = os.Getenv(EnvVar)
	}
	if dir == "" {
		userHome, err := os.UserHomeDir()
		if err != nil {
			return Home{}, fmt.Errorf("cannot find a home for evalmesh: %w (pass --home DIR or set %s)", err, EnvVar)
		}
		dir = filepath.Join(userHome, ".evalmesh")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Home{}, fmt.Errorf("home %q: %w", dir, err)
	}
	return Home{Dir: abs}, nil
}

// The entries' names, for messages that name a file without its home; code that opens one
// uses the Home method of the same name.
const (
	IdentityFile       = "identity.key"
	ConfigFile         = "config.yaml"
	CertFile           = "node-cert.json"
	TrustFile          = "trust.yaml"
	NetworkDocFile     = "network.json"
	LabAgeKeyFile      = "lab-age.key"
	DrawKeyFile        = "draw.key"
	APIFile            = "api"
	APITokenFile       = "api.token"
	BlocksFolder       = "blocks"
	PackBlocksFolder   = "blocks-pack"
	DatastoreFolder    = "datastore"
	StoreFolder        = "store"
	BundlesFolder      = "bundles"
	RunsFolder         = "runs"
	RescoresFolder     = "rescores"
	AttestationsFolder = "attestations"
	ObjectsFolder      = "objects"
	PeersFile          = "peers.json"
)

func (h Home) IdentityPath() string { return filepath.Join(h.Dir, IdentityFile) }
func (h Home) ConfigPath() string   { return filepath.Join(h.Dir, ConfigFile) }
func (h Home) CertPath() string     { return filepath.Join(h.Dir, CertFile) }

// TrustPath is the trust file: the labs whose attestations this node accepts when no network
// document names them (docs/trust-format.md).
func (h Home) TrustPath() string { return filepath.Join(h.Dir, TrustFile) }

// NetworkDocPath is the network document: the labs and ledger options every node of the
// network shares.
func (h Home) NetworkDocPath() string { return filepath.Join(h.Dir, NetworkDocFile) }

// LabAgeKeyPath is the node's copy of its lab's age identity (attest.LabAgeKeyFile in the
// lab's own folder): the node decrypts grants with it; the lab's signing key stays off nodes.
func (h Home) LabAgeKeyPath() string { return filepath.Join(h.Dir, LabAgeKeyFile) }

// DrawKeyPath is the node's copy of its lab's draw key (`evalmesh network draw-key`): where
// the network document names it, the node's re-scorer and audit draws are made with it.
func (h Home) DrawKeyPath() string { return filepath.Join(h.Dir, DrawKeyFile) }

func (h Home) APIPath() string { return filepath.Join(h.Dir, APIFile) }

// APITokenPath holds the API token while the daemon runs (mode 0600): reading it is what
// lets a local account use the API.
func (h Home) APITokenPath() string { return filepath.Join(h.Dir, APITokenFile) }

func (h Home) BlocksDir() string     { return filepath.Join(h.Dir, BlocksFolder) }
func (h Home) PackBlocksDir() string { return filepath.Join(h.Dir, PackBlocksFolder) }
func (h Home) DatastoreDir() string  { return filepath.Join(h.Dir, DatastoreFolder) }
func (h Home) StoreDir() string      { return filepath.Join(h.Dir, StoreFolder) }
func (h Home) BundlesDir() string    { return filepath.Join(h.Dir, BundlesFolder) }
func (h Home) RunsDir() string       { return filepath.Join(h.Dir, RunsFolder) }
func (h Home) RescoresDir() string   { return filepath.Join(h.Dir, RescoresFolder) }
func (h Home) AttestationsDir() string {
	return filepath.Join(h.Dir, AttestationsFolder)
}
func (h Home) ObjectsDir() string { return filepath.Join(h.Dir, ObjectsFolder) }

// PeersPath is the peers the daemon re-dials (node/redial.go).
func (h Home) PeersPath() string { return filepath.Join(h.Dir, PeersFile) }

// ErrExists is returned by Init when the home already holds an identity.
var ErrExists = errors.New("already initialised")

// ErrNotInitialised is returned when the home has no identity yet.
var ErrNotInitialised = errors.New("not initialised")

// Init creates the home with a fresh ed25519 identity and a commented default config. It
// refuses to touch a home that already has an identity, so a key is never lost.
func (h Home) Init() (peer.ID, error) {
	if _, err := os.Stat(h.IdentityPath()); err == nil {
		return "", fmt.Errorf("home %s: %w (identity %s exists; pick another --home or remove it yourself)", h.Dir, ErrExists, h.IdentityPath())
	}
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create home: %w", err)
	}
	priv, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return "", fmt.Errorf("generate identity: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(priv)
	if err != nil {
		return "", err
	}
	// Exclusive: two concurrent inits cannot both write a key.
	if err := WriteFileExclusive(h.IdentityPath(), raw, 0o600); err != nil {
		return "", fmt.Errorf("write identity: %w", err)
	}
	if _, err := os.Stat(h.ConfigPath()); errors.Is(err, fs.ErrNotExist) {
		if err := WriteFileExclusive(h.ConfigPath(), []byte(DefaultConfigYAML), 0o644); err != nil {
			return "", fmt.Errorf("write config: %w", err)
		}
	}
	return peer.IDFromPublicKey(pub)
}

// Identity loads the node's private key.
func (h Home) Identity() (crypto.PrivKey, error) {
	key, err := ReadKey(h.IdentityPath(), "identity")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("home %s: %w: run `evalmesh init --home %s` first", h.Dir, ErrNotInitialised, h.Dir)
	}
	return key, err
}

// ReadKey loads an ed25519 private key file as Init writes one (libp2p's encoding); what
// names it in errors. A missing file is an error wrapping fs.ErrNotExist.
func ReadKey(path, what string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s is corrupt: %w", what, path, err)
	}
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%s %s: key type %v, want ed25519", what, path, key.Type())
	}
	return key, nil
}

// PeerID returns the node's peer ID.
func (h Home) PeerID() (peer.ID, error) {
	key, err := h.Identity()
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(key)
}

// WriteFileExclusive creates path with data, atomically (temp file, fsync, hard link, fsync
// of the folder), and fails with an error wrapping fs.ErrExist if path exists: a crash leaves
// either no file or the whole file, and two racing writers cannot both win.
func WriteFileExclusive(path string, data []byte, mode os.FileMode) error {
	tmp, err := writeTemp(path, data, mode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// WriteFileAtomic replaces path with data so that a crash leaves either the old or the new
// content, never a torn file.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return WriteAtomic(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic replaces path with what write writes, as WriteFileAtomic does (temp file
// beside path, fsync, rename, fsync of the folder): the one atomic write of the repository,
// for content streamed rather than held in memory. On error path is untouched.
func WriteAtomic(path string, mode os.FileMode, write func(io.Writer) error) error {
	tmp, err := writeTempWith(path, mode, write)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp writes data to a synced temporary file beside path and returns its name.
func writeTemp(path string, data []byte, mode os.FileMode) (string, error) {
	return writeTempWith(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func writeTempWith(path string, mode os.FileMode, write func(io.Writer) error) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return "", err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
