package tasks

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// standInAIRS makes an upstream-shaped task folder from a real fixture metadata.yaml plus
// our own prompt and scripts (the upstream ones are not in the fixtures).
func standInAIRS(t testing.TB, fixture string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), fixture)
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join("testdata/airs-bench", fixture))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join("testdata/airs-bench", fixture, e.Name()))
		os.WriteFile(filepath.Join(src, e.Name()), b, 0o644)
	}
	files := map[string]string{
		"project_description.md": "# " + fixture + "\n\nSolve the task; write submission.csv.\n",
		"prepare.py":             "import argparse\n# stand-in for the upstream prepare.py\n",
		"evaluate_prepare.py":    "# stand-in\n",
		"evaluate.py":            "print('--- EVALUATION RESULT ---')\nprint('{\"Accuracy\": 1.0}')\n",
		"utils.py":               "# helper\n",
	}
	for n, c := range files {
		os.WriteFile(filepath.Join(src, n), []byte(c), 0o644)
	}
	return src
}

func TestImportAllTwentyAIRSTasks(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/airs-bench/*")
	if len(dirs) != 20 {
		t.Fatalf("found %d fixtures", len(dirs))
	}
	for _, d := range dirs {
		name := filepath.Base(d)
		t.Run(name, func(t *testing.T) {
			src := standInAIRS(t, name)
			out := filepath.Join(t.TempDir(), "bundle")
			m, err := ImportAIRS(src, out, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Open(out)
			if err != nil {
				t.Fatalf("imported bundle does not open: %v", err)
			}
			if b.Meta.Name != name || m.Name != name {
				t.Errorf("name %q", b.Meta.Name)
			}
			prompt, _ := os.ReadFile(b.PromptPath())
			if !strings.HasPrefix(string(prompt), "# "+name) {
				t.Errorf("prompt.md = %q", prompt)
			}
			// Upstream files kept unchanged under source/.
			for _, f := range []string{"metadata.yaml", "prepare.py", "evaluate.py", "evaluate_prepare.py", "utils.py", "project_description.md"} {
				a, _ := os.ReadFile(filepath.Join(src, f))
				c, err := os.ReadFile(filepath.Join(out, "source", f))
				if err != nil || !bytes.Equal(a, c) {
					t.Errorf("source/%s not kept unchanged: %v", f, err)
				}
			}
			if _, err := Pack(context.Background(), out, NewHashOnlyDAG(), PackOptions{}); err != nil {
				t.Errorf("checked pack of the imported bundle: %v", err)
			}
		})
	}
}

func TestImportWithData(t *testing.T) {
	src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
	data := t.TempDir()
	for p, c := range map[string]string{
		"train/train.csv":           "question_concat,Answer\nq1,1\n",
		"test/test.csv":             "question_concat\nq2\n",
		"test_with_labels/test.csv": "question_concat,Answer\nq2,2\n",
	} {
		os.MkdirAll(filepath.Join(data, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(data, p), []byte(c), 0o644)
	}
	out := filepath.Join(t.TempDir(), "svamp")
	m, err := ImportAIRS(src, out, ImportOptions{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if m.Evaluator.Labels != "private/test_with_labels/test.csv" {
		t.Errorf("evaluator.labels = %q", m.Evaluator.Labels)
	}
	b, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"public/train/train.csv", "public/test/test.csv", "private/test_with_labels/test.csv"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.PublicDir(), "test_with_labels")); err == nil {
		t.Error("labels leaked into public/")
	}
	if b.LabelsPath() != filepath.Join(out, "private/test_with_labels/test.csv") {
		t.Errorf("LabelsPath %s", b.LabelsPath())
	}
}

func TestImportRefusals(t *testing.T) {
	src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
	t.Run("out not empty", func(t *testing.T) {
		out := t.TempDir()
		os.WriteFile(filepath.Join(out, "x"), nil, 0o644)
		if _, err := ImportAIRS(src, out, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no prompt", func(t *testing.T) {
		os.Remove(filepath.Join(src, "project_description.md"))
		parent := t.TempDir()
		_, err := ImportAIRS(src, filepath.Join(parent, "b"), ImportOptions{})
		if err == nil || !strings.Contains(err.Error(), "project_description.md") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("symlink in source", func(t *testing.T) {
		src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
		os.Symlink("/etc/passwd", filepath.Join(src, "evil.py"))
		parent := t.TempDir()
		_, err := ImportAIRS(src, filepath.Join(parent, "b"), ImportOptions{})
		if err == nil || !strings.Contains(err.Error(), "evil.py") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("empty data dir", func(t *testing.T) {
		parent := t.TempDir()
		_, err := ImportAIRS(standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy"), filepath.Join(parent, "b"), ImportOptions{DataDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "test_with_labels") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
}

// --out may name a folder whose parents do not exist yet (bundles/svamp on a fresh
// machine); a failed import removes the parents it made.
func TestImportCreatesMissingParents(t *testing.T) {
	src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
	out := filepath.Join(t.TempDir(), "bundles", "airs", "svamp")
	if _, err := ImportAIRS(src, out, ImportOptions{}); err != nil {
		t.Fatalf("import into a new nested folder: %v", err)
	}
	if _, err := Open(out); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	_, err := ImportAIRS(src, filepath.Join(parent, "bundles", "svamp"), ImportOptions{DataDir: t.TempDir()})
	if err == nil {
		t.Fatal("import with an empty --data folder accepted")
	}
	assertNothingWritten(t, parent)
	// A target that exists and is not empty is named as --out.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := ImportAIRS(src, full, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Fatalf("got %v", err)
	}
}

// --gpus and --wall-clock make a variant on purpose: a CPU-only import asks for no GPU.
func TestImportLimitsVariant(t *testing.T) {
	src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
	zero := 0
	m, err := ImportAIRS(src, filepath.Join(t.TempDir(), "b"), ImportOptions{GPUs: &zero, WallClockSeconds: 7200})
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits.GPUs != 0 || m.Limits.WallClockSeconds != 7200 {
		t.Fatalf("limits %+v, want 0 GPUs and 7200 s", m.Limits)
	}
	d, err := ImportAIRS(src, filepath.Join(t.TempDir(), "c"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Limits.GPUs != 1 || d.Limits.WallClockSeconds != AIRSDefaultWallClockSeconds {
		t.Fatalf("default limits %+v", d.Limits)
	}
	neg := -1
	if _, err := ImportAIRS(src, filepath.Join(t.TempDir(), "d"), ImportOptions{GPUs: &neg}); err == nil || !strings.Contains(err.Error(), "--gpus -1") {
		t.Fatalf("err %v", err)
	}
}
