// Package home owns the layout of a node home directory (default ~/.evalmesh): the node's
// ed25519 libp2p identity, its config file, its optional lab certificate, and the folders
// other packages keep their state in. It creates and reads those files and nothing else.
//
// Layout (all paths relative to the home):
//
//	identity.key      libp2p-marshalled ed25519 private key, mode 0600 (never overwritten)
//	config.yaml       commented node config (see Config)
//	node-cert.json    optional: this node's certificate from its lab (attest.NodeCert)
//	api               while the daemon runs: its HTTP API address (host:port)
//	peers.json        the peers the daemon re-dials (node package; rewritten atomically)
//	blocks/           the blockstore (node package)
//	datastore/        the datastore: pins, metadata (node package)
//	runs/             one folder per run (runner package)
//	attestations/     signed envelopes by ID (runner, node)
//	objects/          submissions and log archives by CID (runner)
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

func (h Home) IdentityPath() string { return filepath.Join(h.Dir, "identity.key") }
func (h Home) ConfigPath() string   { return filepath.Join(h.Dir, "config.yaml") }
func (h Home) CertPath() string     { return filepath.Join(h.Dir, "node-cert.json") }
func (h Home) APIPath() string      { return filepath.Join(h.Dir, "api") }
func (h Home) BlocksDir() string    { return filepath.Join(h.Dir, "blocks") }
func (h Home) DatastoreDir() string { return filepath.Join(h.Dir, "datastore") }
func (h Home) RunsDir() string      { return filepath.Join(h.Dir, "runs") }
func (h Home) AttestationsDir() string {
	return filepath.Join(h.Dir, "attestations")
}
func (h Home) ObjectsDir() string { return filepath.Join(h.Dir, "objects") }
func (h Home) PeersPath() string  { return filepath.Join(h.Dir, "peers.json") }

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
	raw, err := os.ReadFile(h.IdentityPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("home %s: %w: run `evalmesh init --home %s` first", h.Dir, ErrNotInitialised, h.Dir)
	}
	if err != nil {
		return nil, err
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("identity %s is corrupt: %w", h.IdentityPath(), err)
	}
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("identity %s: key type %v, want ed25519", h.IdentityPath(), key.Type())
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
