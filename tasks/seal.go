package tasks

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"filippo.io/age"
)

// Sealed bundles (docs/bundle-format.md §7): everything an agent must not see — private/ and
// every top-level entry but task.yaml, prompt.md and public/ — is one tar archive encrypted
// with age to a per-bundle X25519 data key and stored as private.age. The bundle (and its
// CID) can then be pinned anywhere; only a holder of the data key can score. The data key
// travels to each lab in grants (package attest), so adding or removing a lab never
// changes the bundle. The crypto is age's; nothing here is hand-rolled but the archive
// checks.

// SealedFile is the sealed part of a sealed bundle.
const SealedFile = "private.age"

// SealedFormat is the lowest format version a sealed bundle's task.yaml must declare.
const SealedFormat = 2

// Limits of a sealed archive a reader accepts (as for DAGs, §5.6).
const (
	maxSealedEntries = 1 << 20
	maxSealedDepth   = 256
)

// MaxSealedSize bounds the bytes a sealed archive's files declare in total.
var MaxSealedSize int64 = 64 << 30

// DataKey is a bundle's data key: an age X25519 identity made for that bundle alone.
type DataKey = age.X25519Identity

// NewDataKey makes a fresh data key.
func NewDataKey() (*DataKey, error) { return age.GenerateX25519Identity() }

// ParseDataKey reads a data key in age's text form (AGE-SECRET-KEY-1…).
func ParseDataKey(s string) (*DataKey, error) {
	k, err := age.ParseX25519Identity(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("data key: %w (want an AGE-SECRET-KEY-1… string)", err)
	}
	return k, nil
}

// IsSealed reports whether the bundle folder dir holds a sealed private part.
func IsSealed(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, SealedFile))
	return err == nil && fi.Mode().IsRegular()
}

// clearTop are the top-level names a sealed bundle keeps in the clear: what the agent sees.
var clearTop = map[string]bool{MetaFile: true, PromptFile: true, PublicDir: true}

// Seal writes a sealed copy of the valid, unsealed bundle src to the new folder dst and
// returns the data key it is sealed under. task.yaml is rewritten with format 2; prompt.md
// and public/ are copied; every other top-level entry (private/, evaluate/, source/, a gold
// submission) goes into private.age. The sealed folder is written beside dst and renamed
// onto it at the end, so a failure leaves no dst. Sealing twice gives two different
// bundles (age's keys are random): seal once, then pin and grant that CID.
func Seal(src, dst string) (*DataKey, error) {
	b, err := Open(src)
	if err != nil {
		return nil, err
	}
	if b.Sealed {
		return nil, fmt.Errorf("bundle %s is sealed already (grant its key instead: evalmesh task grant CID --lab NAME)", src)
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("%s exists: seal writes a new folder; remove it or pick another --out", dst)
	}
	key, err := NewDataKey()
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dst)+".seal-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	m := *b.Meta
	m.Format = max(m.Format, SealedFormat)
	meta, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, MetaFile), meta, 0o644); err != nil {
		return nil, err
	}
	if err := copyFile(filepath.Join(src, PromptFile), filepath.Join(tmp, PromptFile), nil, true); err != nil {
		return nil, err
	}
	if err := CopyTree(filepath.Join(src, PublicDir), filepath.Join(tmp, PublicDir)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(tmp, SealedFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	err = writeSealed(f, src, key.Recipient())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", src, err)
	}
	if _, err := Open(tmp); err != nil {
		return nil, fmt.Errorf("seal %s: the sealed copy does not open: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return nil, err
	}
	ok = true
	return key, nil
}

// writeSealed encrypts the archive of src's hidden part to r.
func writeSealed(w io.Writer, src string, r age.Recipient) error {
	enc, err := age.Encrypt(w, r)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(enc)
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents { // sorted by name
		if strings.HasPrefix(e.Name(), ".") || clearTop[e.Name()] {
			continue
		}
		if err := tarTree(tw, src, e.Name()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return enc.Close()
}

// tarTree adds the bundle-relative path rel (a folder or a regular file) to tw with fixed
// modes and times, so the archive depends on the bytes only.
func tarTree(tw *tar.Writer, root, rel string) error {
	abs := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		ents, err := os.ReadDir(abs)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if err := tarTree(tw, root, rel+"/"+e.Name()); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		f, fi, err := OpenRegular(abs)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer f.Close()
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Size: fi.Size(), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w (did it change while being sealed?)", rel, err)
		}
		return nil
	}
	return fmt.Errorf("%s: %s", rel, describeMode(fi.Mode()))
}

// SealedEntry is one entry of a sealed archive as ReadSealed hands it out.
type SealedEntry struct {
	Name string // bundle-relative, slash-separated, e.g. private/labels.csv
	Dir  bool
	Size int64
}

// ErrSealedKey means private.age does not decrypt under the key given: the wrong data key,
// or a file changed after sealing.
var ErrSealedKey = errors.New("private.age does not decrypt with this data key (a wrong key, or the file was changed after sealing)")

// decryptSealed opens the sealed part of bundle dir for reading under key.
func decryptSealed(dir string, key *DataKey) (io.Reader, func(), error) {
	f, _, err := OpenRegular(filepath.Join(dir, SealedFile))
	if err != nil {
		return nil, nil, fmt.Errorf("sealed bundle %s: %w", dir, err)
	}
	r, err := age.Decrypt(f, key)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w: %v", filepath.Join(dir, SealedFile), ErrSealedKey, err)
	}
	return authReader{r}, func() { f.Close() }, nil
}

// authReader marks every read error of age's payload (a chunk that does not authenticate,
// a stream cut short) as ErrSealedKey, so it is told apart from a bad archive.
type authReader struct{ r io.Reader }

func (a authReader) Read(b []byte) (int, error) {
	n, err := a.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %v", ErrSealedKey, err)
	}
	return n, err
}

// ReadSealed decrypts the sealed archive from r (the plaintext of private.age) and calls fn
// for each entry, with a reader of a file's bytes. It is a decoder of outside input: the
// archive is refused, naming the entry, for any type but folders and regular files, a name
// that is not a clean relative path (absolute, "..", "\\", NUL, an empty or over-long
// element), a name in the clear part (task.yaml, prompt.md, public/), a duplicate, a file
// under a name no folder entry introduced (folders come before what they hold), more than
// 2^20 entries, nesting deeper than 256, or files declaring more than MaxSealedSize bytes.
// A read error of age (tampered ciphertext) surfaces as ErrSealedKey.
func ReadSealed(r io.Reader, fn func(e SealedEntry, data io.Reader) error) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	var total int64
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return sealedReadErr(err)
		}
		if n++; n > maxSealedEntries {
			return fmt.Errorf("sealed archive: more than %d entries", maxSealedEntries)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if err := checkSealedName(name); err != nil {
			return fmt.Errorf("sealed archive: entry %q: %w", h.Name, err)
		}
		if seen[name] {
			return fmt.Errorf("sealed archive: entry %q appears twice", name)
		}
		if dir := path.Dir(name); dir != "." && !seen[dir+"/"] {
			return fmt.Errorf("sealed archive: entry %q comes before (or without) its folder %q", name, dir)
		}
		seen[name] = true
		e := SealedEntry{Name: name}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Dir = true
			seen[name+"/"] = true
		case tar.TypeReg:
			if h.Size < 0 || h.Size > MaxSealedSize-total {
				return fmt.Errorf("sealed archive: entry %q: files declare more than %d bytes", name, MaxSealedSize)
			}
			total += h.Size
			e.Size = h.Size
		default:
			return fmt.Errorf("sealed archive: entry %q: type %q is not a folder or a regular file (a bundle holds neither links nor devices)", name, string(h.Typeflag))
		}
		if err := fn(e, tr); err != nil {
			return sealedReadErr(err)
		}
	}
}

func sealedReadErr(err error) error {
	var pe *pathRefusal
	if errors.As(err, &pe) || errors.Is(err, ErrSealedKey) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) { // age ended the stream early
		return fmt.Errorf("%w: %v", ErrSealedKey, err)
	}
	return fmt.Errorf("sealed archive: %w", err)
}

// pathRefusal is an error of the callback that must reach the caller unwrapped.
type pathRefusal struct{ err error }

func (p *pathRefusal) Error() string { return p.err.Error() }
func (p *pathRefusal) Unwrap() error { return p.err }

func checkSealedName(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || strings.ContainsAny(name, "\\\x00") {
		return errors.New("not a clean relative path")
	}
	parts := strings.Split(name, "/")
	if len(parts) > maxSealedDepth {
		return fmt.Errorf("nested deeper than %d", maxSealedDepth)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || len(p) > 255 {
			return fmt.Errorf("element %q is not a valid name", p)
		}
	}
	if clearTop[parts[0]] {
		return fmt.Errorf("%s is in the clear part of a sealed bundle", parts[0])
	}
	return nil
}

// ReadSealedFile decrypts bundle dir's private.age under key and returns the bytes of the
// one file name (bundle-relative), at most limit bytes. Nothing is written to disk: the
// built-in metric scores from memory.
func ReadSealedFile(dir string, key *DataKey, name string, limit int64) ([]byte, error) {
	r, done, err := decryptSealed(dir, key)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []byte
	found := false
	err = ReadSealed(r, func(e SealedEntry, data io.Reader) error {
		if e.Dir || e.Name != name {
			return nil
		}
		if e.Size > limit {
			return &pathRefusal{fmt.Errorf("sealed %s is %d bytes, over the %d-byte limit", name, e.Size, limit)}
		}
		b, err := io.ReadAll(data)
		if err != nil {
			return err
		}
		out, found = b, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("sealed bundle %s holds no %s", dir, name)
	}
	return out, nil
}

// Unseal decrypts bundle dir's private.age under key into the new folder dest and returns
// a Bundle whose private part (PrivateDir, LabelsPath) is there; its metadata is b's, and
// its public part is not there (the agent has run by then). dest is created 0700 with O_EXCL files; the caller removes it when done. It is
// for the evaluation step only: dest must be a place no agent can reach.
func Unseal(b *Bundle, key *DataKey, dest string) (*Bundle, error) {
	if !b.Sealed {
		return b, nil
	}
	r, done, err := decryptSealed(b.Dir, key)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := os.Mkdir(dest, 0o700); err != nil {
		return nil, err
	}
	err = ReadSealed(r, func(e SealedEntry, data io.Reader) error {
		p := filepath.Join(dest, filepath.FromSlash(e.Name))
		if e.Dir {
			return os.Mkdir(p, 0o755)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, io.LimitReader(data, e.Size+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != e.Size {
			err = &pathRefusal{fmt.Errorf("sealed %s: %d bytes, header says %d", e.Name, n, e.Size)}
		}
		return err
	})
	if err != nil {
		os.RemoveAll(dest)
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dest, PrivateDir)); err != nil {
		if err := os.Mkdir(filepath.Join(dest, PrivateDir), 0o755); err != nil {
			os.RemoveAll(dest)
			return nil, err
		}
	}
	return &Bundle{Dir: dest, Meta: b.Meta}, nil
}

// SealedNames lists the entries of bundle dir's sealed archive (for inspection by a key
// holder), sorted.
func SealedNames(dir string, key *DataKey) ([]SealedEntry, error) {
	r, done, err := decryptSealed(dir, key)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []SealedEntry
	err = ReadSealed(r, func(e SealedEntry, data io.Reader) error {
		_, err := io.Copy(io.Discard, data) // the whole payload is authenticated as it is read
		out = append(out, e)
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// sealedLayoutProblems checks a sealed bundle's top level: private.age regular, no private/.
func sealedLayoutProblems(dir string) []string {
	var probs []string
	if _, err := os.Lstat(filepath.Join(dir, PrivateDir)); err == nil {
		probs = append(probs, "private/: a sealed bundle (with private.age) holds no private/ in the clear; remove one of them")
	}
	if fi, err := os.Lstat(filepath.Join(dir, SealedFile)); err == nil && !fi.Mode().IsRegular() {
		probs = append(probs, SealedFile+": expected a regular file")
	}
	return probs
}
