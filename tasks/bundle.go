package tasks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Bundle file and folder names (docs/bundle-format.md §2).
const (
	MetaFile    = "task.yaml"
	PromptFile  = "prompt.md"
	PublicDir   = "public"
	PrivateDir  = "private"
	EvaluateDir = "evaluate"
	SourceDir   = "source"
)

// Bundle is a validated bundle folder on disk.
type Bundle struct {
	Dir  string
	Meta *Meta
	// Sealed: the private part is private.age (docs/bundle-format.md §7), readable only
	// with the bundle's data key (Unseal, ReadSealedFile).
	Sealed bool
}

// Open checks the layout of dir (task.yaml, prompt.md, public/, private/ present and of
// the right kind; no symlinks at the top level) and parses task.yaml.
func Open(dir string) (*Bundle, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("bundle %s: not a folder; expected a folder with task.yaml, prompt.md, public/, private/ (or unpack a CAR first: evalmesh task unpack)", dir)
	}
	sealed := IsSealed(dir)
	if errs := checkLayout(dir, sealed); len(errs) > 0 {
		return nil, &LayoutError{Dir: dir, Problems: errs}
	}
	data, err := ReadRegular(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, err
	}
	m, err := ParseMeta(data)
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.Source = filepath.Join(dir, MetaFile)
			return nil, ve
		}
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetaFile), err)
	}
	b := &Bundle{Dir: dir, Meta: m, Sealed: sealed}
	if sealed && m.Format < SealedFormat {
		return nil, &ValidationError{Source: filepath.Join(dir, MetaFile), Fields: []FieldError{{
			Field: "format",
			Msg:   fmt.Sprintf("%d: a sealed bundle (with %s) must say format: %d or later", max(m.Format, 1), SealedFile, SealedFormat),
		}}}
	}
	if m.Evaluator.Labels != "" && !sealed { // a sealed bundle's labels are checked when unsealed
		if fi, err := os.Lstat(b.LabelsPath()); err != nil || !fi.Mode().IsRegular() {
			return nil, &ValidationError{Source: filepath.Join(dir, MetaFile), Fields: []FieldError{{
				Field: "evaluator.labels",
				Msg:   fmt.Sprintf("%q: no such regular file in the bundle; add it or fix the path", m.Evaluator.Labels),
			}}}
		}
	}
	return b, nil
}

// LayoutError lists what is missing or wrong in a bundle folder.
type LayoutError struct {
	Dir      string
	Problems []string
}

func (e *LayoutError) Error() string {
	s := fmt.Sprintf("bundle %s: not a valid bundle layout:", e.Dir)
	for _, p := range e.Problems {
		s += "\n  " + p
	}
	return s
}

func checkLayout(dir string, sealed bool) []string {
	var probs []string
	if sealed {
		probs = sealedLayoutProblems(dir)
	}
	want := []struct {
		name string
		dir  bool
		req  bool
		what string
	}{
		{MetaFile, false, true, "the task metadata (see docs/bundle-format.md)"},
		{PromptFile, false, true, "what the agent is told"},
		{PublicDir, true, true, "the data the agent may read (may be empty)"},
		{PrivateDir, true, !sealed, "evaluation-only data such as labels (may be empty), or private.age in a sealed bundle"},
		{EvaluateDir, true, false, ""},
		{SourceDir, true, false, ""},
	}
	for _, w := range want {
		fi, err := os.Lstat(filepath.Join(dir, w.name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			if w.req {
				kind := "file"
				if w.dir {
					kind = "folder"
				}
				probs = append(probs, fmt.Sprintf("%s: missing; expected a %s: %s", w.name, kind, w.what))
			}
		case err != nil:
			probs = append(probs, fmt.Sprintf("%s: %v", w.name, err))
		case fi.Mode()&os.ModeSymlink != 0:
			probs = append(probs, fmt.Sprintf("%s: is a symlink; bundles hold no symlinks, copy the content in", w.name))
		case w.dir && !fi.IsDir():
			probs = append(probs, fmt.Sprintf("%s: expected a folder", w.name))
		case !w.dir && !fi.Mode().IsRegular():
			probs = append(probs, fmt.Sprintf("%s: expected a regular file", w.name))
		}
	}
	return probs
}

// PublicDir is the folder mounted read-only into the agent's container.
func (b *Bundle) PublicDir() string { return filepath.Join(b.Dir, PublicDir) }

// PrivateDir is the folder only the evaluator sees.
func (b *Bundle) PrivateDir() string { return filepath.Join(b.Dir, PrivateDir) }

// PromptPath is the prompt file mounted into the agent's container.
func (b *Bundle) PromptPath() string { return filepath.Join(b.Dir, PromptFile) }

// LabelsPath is evaluator.labels on disk, or "" when the task has none.
func (b *Bundle) LabelsPath() string {
	if b.Meta.Evaluator.Labels == "" {
		return ""
	}
	return filepath.Join(b.Dir, filepath.FromSlash(b.Meta.Evaluator.Labels))
}
