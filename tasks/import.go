package tasks

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ImportOptions tunes ImportAIRS.
type ImportOptions struct {
	// DataDir, if set, holds data the lab already prepared with the upstream prepare.py and
	// evaluate_prepare.py: train/, test/ (and validation/) go to public/, test_with_labels/
	// to private/.
	DataDir string
	// GPUs, if not nil, replaces AIRS-Bench's one GPU per run (0 makes a CPU-only variant).
	GPUs *int
	// WallClockSeconds, if above 0, replaces AIRS-Bench's 24 hours per run.
	WallClockSeconds int64
}

// ImportAIRS turns an upstream AIRS-Bench task folder (metadata.yaml,
// project_description.md, prepare.py, evaluate_prepare.py, evaluate.py, …) into a bundle
// at out: task.yaml converted from metadata.yaml, prompt.md from project_description.md,
// every upstream file kept unchanged under source/. The bundle is built in a temporary
// folder beside out and renamed at the end; out must not exist or be empty.
func ImportAIRS(src, out string, opts ImportOptions) (*Meta, error) {
	data, err := ReadRegular(filepath.Join(src, "metadata.yaml"))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w (expected an AIRS-Bench task folder, airsbench/tasks/rad/<Task>/)", src, err)
	}
	a, err := ParseAIRSMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	m, err := a.ToMeta()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	if opts.GPUs != nil {
		if *opts.GPUs < 0 {
			return nil, fmt.Errorf("import %s: --gpus %d: expected a count >= 0 (0: a CPU-only variant)", src, *opts.GPUs)
		}
		m.Limits.GPUs = *opts.GPUs
	}
	if opts.WallClockSeconds < 0 {
		return nil, fmt.Errorf("import %s: --wall-clock: expected a positive duration", src)
	}
	if opts.WallClockSeconds > 0 {
		m.Limits.WallClockSeconds = opts.WallClockSeconds
	}
	prompt, err := ReadRegular(filepath.Join(src, "project_description.md"))
	if err != nil {
		return nil, fmt.Errorf("import %s: the prompt: %w (AIRS-Bench tasks keep it in project_description.md)", src, err)
	}
	if err := checkTarget(out, "import: --out"); err != nil {
		return nil, err
	}
	out = filepath.Clean(out)
	undoParents, err := makeParents(filepath.Dir(out))
	if err != nil {
		return nil, fmt.Errorf("import %s: --out %s: %w", src, out, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".import-")
	if err != nil {
		undoParents()
		return nil, fmt.Errorf("import %s: --out %s: %w", src, out, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			undoParents()
		}
	}()
	for _, d := range []string{PublicDir, PrivateDir} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := CopyTree(src, filepath.Join(tmp, SourceDir)); err != nil {
		return nil, fmt.Errorf("import %s: copying the upstream files: %w", src, err)
	}
	if opts.DataDir != "" {
		labels, err := placeData(opts.DataDir, tmp)
		if err != nil {
			return nil, fmt.Errorf("import %s: --data %s: %w", src, opts.DataDir, err)
		}
		m.Evaluator.Labels = labels
	}
	if err := writeFileSync(filepath.Join(tmp, PromptFile), prompt); err != nil {
		return nil, err
	}
	y, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(tmp, MetaFile), y); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if _, err := Open(tmp); err != nil {
		return nil, fmt.Errorf("import %s: the result is not a valid bundle: %w", src, err)
	}
	if fi, err := os.Lstat(out); err == nil && fi.IsDir() {
		if err := os.Remove(out); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	ok = true
	return m, syncDir(filepath.Dir(out))
}

// placeData copies prepared data into the bundle and returns evaluator.labels: the one
// CSV file directly under test_with_labels/, if there is exactly one.
func placeData(data, bundle string) (string, error) {
	fi, err := os.Stat(data)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errors.New("not a folder")
	}
	found := false
	for _, d := range []string{"train", "test", "validation"} {
		srcd := filepath.Join(data, d)
		if err := dataFolder(srcd); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return "", err
		}
		found = true
		if err := CopyTree(srcd, filepath.Join(bundle, PublicDir, d)); err != nil {
			return "", err
		}
	}
	labelsDir := filepath.Join(data, "test_with_labels")
	if err := dataFolder(labelsDir); errors.Is(err, os.ErrNotExist) {
		if !found {
			return "", errors.New("none of train/, test/, validation/, test_with_labels/ found; run the task's prepare.py and evaluate_prepare.py first")
		}
		return "", nil
	} else if err != nil {
		return "", err
	}
	if err := CopyTree(labelsDir, filepath.Join(bundle, PrivateDir, "test_with_labels")); err != nil {
		return "", err
	}
	ents, err := os.ReadDir(labelsDir)
	if err != nil {
		return "", err
	}
	var csvs []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(strings.ToLower(e.Name()), ".csv") && !strings.HasPrefix(e.Name(), ".") {
			csvs = append(csvs, e.Name())
		}
	}
	if len(csvs) == 1 {
		return PrivateDir + "/test_with_labels/" + csvs[0], nil
	}
	return "", nil
}

// dataFolder checks that p, one of the prepared data's top-level folders, is a folder itself
// and not a link to one: a link would copy whatever it points to into the bundle (a link
// deeper down is refused by CopyTree).
func dataFolder(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return nil
	case fi.Mode().IsRegular():
		return fmt.Errorf("%s is a file; expected a folder", p)
	}
	return fmt.Errorf("%s: %s", p, describeMode(fi.Mode()))
}

// CopyTree copies regular files and folders from src to the new folder dst, refusing
// symlinks and special files (a bundle holds neither; files are opened with OpenRegular)
// and skipping hidden names as Pack does.
func CopyTree(src, dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			if err := CopyTree(s, d); err != nil {
				return err
			}
		case t.IsRegular():
			if err := copyFile(s, d, nil, true); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: %s", s, describeMode(t))
		}
	}
	return nil
}

// copyFile copies the file src to the new file dst (0644; an existing dst is an error), the
// package's one file copy. wrap, when set, wraps dst's writer (progress counting); sync
// fsyncs dst before closing it.
func copyFile(src, dst string, wrap func(io.Writer) io.Writer, sync bool) error {
	in, _, err := OpenRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	w := io.Writer(out)
	if wrap != nil {
		w = wrap(out)
	}
	if _, err := io.Copy(w, in); err != nil {
		out.Close()
		return err
	}
	if sync {
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

func writeFileSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
