package tasks

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

// sealedSVAMP seals the SVAMP fixture bundle and returns the source, the sealed folder, its
// key and the labels' bytes.
func sealedSVAMP(t *testing.T) (src, dst string, key *DataKey, labels []byte) {
	t.Helper()
	src = svampBundle(t, func(b []byte) []byte { return b })
	labels, err := os.ReadFile(filepath.Join(src, "private", "test_with_labels", "labels.csv"))
	if err != nil {
		t.Fatal(err)
	}
	dst = filepath.Join(t.TempDir(), "sealed")
	key, err = Seal(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return src, dst, key, labels
}

// assertNoClear fails if any file under dir holds labels (or a long line of it).
func assertNoClear(t *testing.T, dir string, labels []byte) {
	t.Helper()
	probes := [][]byte{labels}
	for _, l := range bytes.Split(labels, []byte("\n")) {
		if len(l) >= 12 {
			probes = append(probes, l)
		}
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, pr := range probes {
			if bytes.Contains(b, pr) {
				t.Errorf("%s holds labels in the clear (%q)", p, pr)
				return nil
			}
		}
		return nil
	})
}

func TestSealRoundTrip(t *testing.T) {
	src, dst, key, labels := sealedSVAMP(t)
	b, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Sealed || b.Meta.Format != SealedFormat {
		t.Fatalf("sealed %v format %d", b.Sealed, b.Meta.Format)
	}
	for _, name := range []string{PrivateDir, SourceDir, EvaluateDir} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s/ is in the clear in the sealed bundle", name)
		}
	}
	// The agent's part is unchanged.
	for _, name := range []string{PromptFile, "public"} {
		c1, err1 := Pack(context.Background(), filepath.Join(src, name), NewHashOnlyDAG(), PackOptions{Unchecked: true})
		c2, err2 := Pack(context.Background(), filepath.Join(dst, name), NewHashOnlyDAG(), PackOptions{Unchecked: true})
		if err1 != nil || err2 != nil || c1 != c2 {
			t.Errorf("%s differs after sealing: %v %v %v %v", name, c1, c2, err1, err2)
		}
	}
	assertNoClear(t, dst, labels)

	got, err := ReadSealedFile(dst, key, "private/test_with_labels/labels.csv", 1<<20)
	if err != nil || !bytes.Equal(got, labels) {
		t.Fatalf("labels from the sealed file: %v", err)
	}
	names, err := SealedNames(dst, key)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, e := range names {
		listed = append(listed, e.Name)
	}
	if !strings.Contains(strings.Join(listed, ","), "private/test_with_labels/labels.csv") || !strings.Contains(strings.Join(listed, ","), "source/") {
		t.Fatalf("sealed entries %v", listed)
	}
	dest := filepath.Join(t.TempDir(), "clear")
	ub, err := Unseal(b, key, dest)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(ub.LabelsPath()); err != nil || !bytes.Equal(b, labels) {
		t.Fatalf("unsealed labels: %v", err)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("unseal folder mode %v %v", fi.Mode(), err)
	}

	// The sealed folder has a stable CID, different from the clear bundle's.
	c1, err := BundleCID(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := BundleCID(context.Background(), dst)
	c0, _ := BundleCID(context.Background(), src)
	if c1 != c2 || c1 == c0 {
		t.Fatalf("sealed CIDs %s %s, clear %s", c1, c2, c0)
	}
	// The clear bundle still opens as format 1.
	if ob, err := Open(src); err != nil || ob.Sealed || ob.Meta.Format > 1 {
		t.Fatalf("unsealed bundle: %+v %v", ob, err)
	}
}

func TestSealedWrongKeyAndTamperRefused(t *testing.T) {
	_, dst, key, _ := sealedSVAMP(t)
	other, _ := NewDataKey()
	if _, err := ReadSealedFile(dst, other, "private/test_with_labels/labels.csv", 1<<20); !errors.Is(err, ErrSealedKey) {
		t.Fatalf("wrong key: %v", err)
	}
	p := filepath.Join(dst, SealedFile)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{len(orig) / 2, len(orig) - 1, 40} {
		bad := bytes.Clone(orig)
		bad[at] ^= 0x01
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSealedFile(dst, key, "private/test_with_labels/labels.csv", 1<<20); !errors.Is(err, ErrSealedKey) {
			t.Fatalf("byte %d of %d flipped: %v", at, len(orig), err)
		}
		b, _ := Open(dst)
		if _, err := Unseal(b, key, filepath.Join(t.TempDir(), "x")); err == nil {
			t.Fatalf("unsealed a tampered file (byte %d)", at)
		}
	}
	// Cut short: refused too (age authenticates the end of the stream).
	os.WriteFile(p, orig[:len(orig)-20], 0o644)
	if _, err := ReadSealedFile(dst, key, "private/test_with_labels/labels.csv", 1<<20); !errors.Is(err, ErrSealedKey) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestSealedLayoutRules(t *testing.T) {
	_, dst, _, _ := sealedSVAMP(t)
	// A sealed bundle must declare format 2.
	meta, _ := os.ReadFile(filepath.Join(dst, MetaFile))
	os.WriteFile(filepath.Join(dst, MetaFile), bytes.Replace(meta, []byte("format: 2"), []byte("format: 1"), 1), 0o644)
	if _, err := Open(dst); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("sealed bundle of format 1 opened: %v", err)
	}
	os.WriteFile(filepath.Join(dst, MetaFile), meta, 0o644)
	// private/ beside private.age is refused.
	os.Mkdir(filepath.Join(dst, PrivateDir), 0o755)
	if _, err := Open(dst); err == nil || !strings.Contains(err.Error(), "private.age") {
		t.Fatalf("private/ and private.age together: %v", err)
	}
	if _, err := Seal(dst, filepath.Join(t.TempDir(), "again")); err == nil {
		t.Fatal("sealed an invalid bundle")
	}
}

// tarOf builds a sealed archive's plaintext.
func tarOf(t testing.TB, ents ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range ents {
		h := h
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestReadSealedRefusals(t *testing.T) {
	dir := tar.Header{Typeflag: tar.TypeDir, Name: "private/"}
	file := func(n string) tar.Header { return tar.Header{Typeflag: tar.TypeReg, Name: n, Size: 3, Mode: 0o644} }
	for name, tc := range map[string]struct {
		ents []tar.Header
		want string
	}{
		"ok":               {[]tar.Header{dir, file("private/a.csv")}, ""},
		"dotdot":           {[]tar.Header{dir, file("private/../../etc/passwd")}, "clean relative"},
		"absolute":         {[]tar.Header{file("/etc/passwd")}, "clean relative"},
		"symlink":          {[]tar.Header{dir, {Typeflag: tar.TypeSymlink, Name: "private/l", Linkname: "/etc/passwd"}}, "not a folder or a regular file"},
		"hard link":        {[]tar.Header{dir, {Typeflag: tar.TypeLink, Name: "private/l", Linkname: "private/a"}}, "not a folder or a regular file"},
		"fifo":             {[]tar.Header{dir, {Typeflag: tar.TypeFifo, Name: "private/f"}}, "not a folder or a regular file"},
		"clear part":       {[]tar.Header{file("task.yaml")}, "clear part"},
		"public":           {[]tar.Header{{Typeflag: tar.TypeDir, Name: "public/"}}, "clear part"},
		"duplicate":        {[]tar.Header{dir, file("private/a"), file("private/a")}, "twice"},
		"file before dir":  {[]tar.Header{file("private/a")}, "before (or without) its folder"},
		"backslash":        {[]tar.Header{file("a\\b")}, "clean relative"},
		"huge declaration": {[]tar.Header{dir, {Typeflag: tar.TypeReg, Name: "private/big", Size: 1 << 62}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var data []byte
			if name == "huge declaration" {
				// Only the header: the declaration alone must be refused.
				var buf bytes.Buffer
				tw := tar.NewWriter(&buf)
				tw.WriteHeader(&tc.ents[0])
				tw.WriteHeader(&tc.ents[1])
				data = buf.Bytes()
				tc.want = "declare more than"
			} else {
				data = tarOf(t, tc.ents...)
			}
			err := ReadSealed(bytes.NewReader(data), func(e SealedEntry, r io.Reader) error {
				_, err := io.Copy(io.Discard, r)
				return err
			})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// fuzzKey is a fixed data key for the fuzz targets (a test key, sealing nothing real).
const fuzzKey = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"

// FuzzReadSealed: the sealed-archive parser never panics and never hands out an entry it
// should have refused.
func FuzzReadSealed(f *testing.F) {
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeDir, Name: "private/"}, tar.Header{Typeflag: tar.TypeReg, Name: "private/l.csv", Size: 4}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeSymlink, Name: "private", Linkname: "/"}))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0}, 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ReadSealed(bytes.NewReader(b), func(e SealedEntry, r io.Reader) error {
			if err := checkSealedName(e.Name); err != nil {
				t.Fatalf("handed out %q: %v", e.Name, err)
			}
			_, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
			return err
		})
	})
}

// FuzzSealedFile: a private.age of any bytes, decrypted under a fixed key and parsed,
// never panics; the seed is a real sealed file.
func FuzzSealedFile(f *testing.F) {
	key, err := age.ParseX25519Identity(fuzzKey)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	w, _ := age.Encrypt(&buf, key.Recipient())
	w.Write(tarOf(f, tar.Header{Typeflag: tar.TypeDir, Name: "private/"}, tar.Header{Typeflag: tar.TypeReg, Name: "private/l.csv", Size: 4}))
	w.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\nxyz\n--- aaa\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := age.Decrypt(bytes.NewReader(b), key)
		if err != nil {
			return
		}
		_ = ReadSealed(r, func(e SealedEntry, r io.Reader) error {
			_, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
			return err
		})
	})
}
