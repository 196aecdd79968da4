package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseMeta(f *testing.F) {
	seed, err := os.ReadFile("testdata/task.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("name: x\nscoring_column: [a, b]\n"))
	f.Add([]byte("metric: {name: MAE, lower_is_better: true, optimal_score: .nan}\n"))
	f.Add([]byte("a: &a [x]\nb: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data)
		if err != nil {
			if m != nil {
				t.Fatal("error with a result")
			}
			return
		}
		// Whatever parses must survive marshal → parse unchanged in what it means.
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("marshal of a valid Meta: %v", err)
		}
		m2, err := ParseMeta(out)
		if err != nil {
			t.Fatalf("re-parse of marshalled valid Meta: %v\n%s", err, out)
		}
		if m2.Name != m.Name || m2.Metric.Name != m.Metric.Name || m2.Metric.OptimalScore != m.Metric.OptimalScore || m2.SOTA.Score != m.SOTA.Score {
			t.Fatalf("round trip changed the metadata")
		}
	})
}

func FuzzParseAIRSMetadata(f *testing.F) {
	paths, _ := filepath.Glob("testdata/airs-bench/*/metadata.yaml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("logging_info:\n  name: X\n  metric: A\n  shape: (1,)\n  sota: [{sota_score: 1}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAIRSMetadata(data)
		if err != nil {
			return
		}
		m, err := a.ToMeta()
		if err != nil {
			return // e.g. a SOTA better than the optimum: refused, with a reason
		}
		if _, err := ParseMeta(mustMarshal(t, m)); err != nil {
			t.Fatalf("ToMeta produced an invalid task.yaml: %v", err)
		}
	})
}

func mustMarshal(t *testing.T, m *Meta) []byte {
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzUnpackCAR feeds arbitrary bytes as a CAR file. Whatever happens, nothing may appear
// outside the target folder, and a failed unpack leaves nothing at all.
func FuzzUnpackCAR(f *testing.F) {
	ctx := context.Background()
	dag := NewMemDAG()
	root, err := Pack(ctx, svampDir, dag, PackOptions{Unchecked: true})
	if err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if err := WriteCAR(ctx, dag, root, &good); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	// Small hostile seeds built as in the unit tests.
	for _, kids := range [][]child{
		{{"..", rawFile(f, "x")}},
		{{"a/b", rawFile(f, "x")}},
		{{"l", protoNode(mustSymlink(f, "/etc"))}},
		{{"big", protoNode([]byte{0x08, 0x02, 0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20})}},
	} {
		r, nodes := bundleish(f, kids...)
		p := writeHostileCAR(f, r, nodes...)
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	// A file of several equal leaves, which the unpacker checks two at a time.
	file, leaves, _ := multiLeafFile(f, 64, 5)
	r, nodes := bundleish(f, child{"data.bin", file})
	b, _ := os.ReadFile(writeHostileCAR(f, r, append(nodes, leaves...)...))
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := UnpackOptions{MaxSize: 1 << 20, MaxEntries: 1000}
		// Most inputs die in the CAR reader or the walk: check those in memory, and touch
		// the disk only for a DAG that passes every check.
		ng, root, closeFn, err := openCARReaderAt(bytes.NewReader(data), "fuzz.car")
		if err != nil {
			return
		}
		defer closeFn()
		if _, err := plan(ctx, ng, root, opts); err != nil {
			var ue *UnsafeError
			if errors.As(err, &ue) && strings.Contains(ue.Path, "\x00") {
				t.Fatalf("error path carries NUL")
			}
			return
		}
		work := t.TempDir()
		parent := filepath.Join(work, "parent")
		os.Mkdir(parent, 0o755)
		out := filepath.Join(parent, "out")
		err = Unpack(ctx, ng, root, out, opts)
		// The pooled leaf path (node's) must come to the same outcome and the same files
		// as boxo's DagReader.
		pooledOut := filepath.Join(t.TempDir(), "out")
		pooledOpts := opts
		pooledOpts.Leaves = &pooledNodes{ng: ng}
		pooledErr := Unpack(ctx, ng, root, pooledOut, pooledOpts)
		if (err == nil) != (pooledErr == nil) {
			t.Fatalf("DagReader: %v; pooled leaves: %v", err, pooledErr)
		}
		if err == nil {
			if a, b := treeText(t, out), treeText(t, pooledOut); a != b {
				t.Fatalf("DagReader wrote\n%s\npooled leaves wrote\n%s", a, b)
			}
		}
		ents, _ := os.ReadDir(parent)
		if err != nil {
			if len(ents) != 0 {
				t.Fatalf("failed unpack (%v) left %v", err, ents[0].Name())
			}
			return
		}
		if len(ents) != 1 || ents[0].Name() != "out" {
			t.Fatalf("unpack wrote beside out: %v", ents)
		}
		wents, _ := os.ReadDir(work)
		if len(wents) != 1 {
			t.Fatalf("unpack wrote outside its parent: %v", wents)
		}
		filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("unpack made a non-regular file %s", p)
			}
			return nil
		})
	})
}

// treeText lists every path under dir with its mode and, for a file, its bytes' sha256.
func treeText(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", rel, info.Mode())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
