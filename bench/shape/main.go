// Command shape prints the figures of the code's shape that issue 42's "Show" asks for, for
// one or more source trees side by side (bench/shape.sh checks revisions out and calls it):
// non-test Go lines of node, of node/... and of the module; the struct in node/... with the
// most fields, with its methods, and every struct named Mesh; the longest functions in
// node/...; the import rules' run; and the references to the wall clock in node/... and
// protocol/....
//
// The wall-clock uses are counted twice: every use, marked or not, read here, and the
// unmarked ones, as a built docs/wallclock.go (-wallclock: bench/shape.sh builds HEAD's)
// lists them over the tree's node, protocol and attest, so every tree is judged by the
// same rule, which says what counts as a mark.
//
// The import rules are run by the repository's own script (docs/imports-deny.sh, as
// `make check` does) over each tree's `go list -deps`: once with the rules handed in
// (-deny-script, -deny-rules: bench/shape.sh hands HEAD's), so every tree is judged by the
// same rules, and once with the tree's own where it has a script and its rules differ.
//
// Everything else is read from the files (go/parser): which files are built on which
// platform is not asked, so a file for another GOOS counts like the rest. One goroutine;
// the trees are only read.
//
//	go run ./bench/shape [-top 10] [-first 3] [-v] [-deny-script F -deny-rules F] LABEL=DIR...
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	top := flag.Int("top", 10, "how many of the longest functions to list")
	first := flag.Int("first", 3, "how many broken import rules to list per tree")
	verbose := flag.Bool("v", false, "list every wall-clock reference")
	script := flag.String("deny-script", "", "the import-rule script to run over every tree (docs/imports-deny.sh of some revision)")
	rules := flag.String("deny-rules", "", "the rules it reads (docs/imports-deny.txt of the same revision)")
	rulesName := flag.String("deny-name", "the rules handed in", "what to call those rules in the table")
	wallclock := flag.String("wallclock", "", "a built docs/wallclock.go (of some revision) to list every tree's unmarked wall-clock uses")
	wallName := flag.String("wallclock-name", "the rule handed in", "what to call that rule in the table")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: shape [flags] LABEL=DIR...  (DIR: a module's root)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || (*script == "") != (*rules == "") {
		flag.Usage()
		os.Exit(2)
	}
	var scriptText, rulesText []byte
	if *script != "" {
		var err error
		if scriptText, err = os.ReadFile(*script); err == nil {
			rulesText, err = os.ReadFile(*rules)
		}
		if err != nil {
			fatal(err)
		}
	}
	absRules, err := filepath.Abs(*rules)
	if err != nil {
		fatal(err)
	}
	var trees []Tree
	for _, arg := range flag.Args() {
		i := strings.LastIndex(arg, "=")
		if i <= 0 {
			fatal(fmt.Errorf("%q: want LABEL=DIR", arg))
		}
		label, dir := arg[:i], arg[i+1:]
		files, err := readTree(dir)
		if err != nil {
			fatal(err)
		}
		t := Tree{Label: label, Shape: Measure(files, *top), Wall: Wallclock{Why: "not run (no -wallclock)"}}
		if *wallclock != "" {
			t.Wall = runWallclock(dir, *wallclock)
		}
		t.Deny = Deny{Why: "not run (no -deny-script)"}
		if scriptText != nil {
			t.Deny = runDeny(dir, scriptText, absRules)
		}
		ownScript, errS := os.ReadFile(filepath.Join(dir, "docs/imports-deny.sh"))
		ownRules, errR := os.ReadFile(filepath.Join(dir, "docs/imports-deny.txt"))
		switch {
		case errS != nil || errR != nil:
			t.Own = Deny{Why: "none (no docs/imports-deny.sh)"}
		case bytes.Equal(ownScript, scriptText) && bytes.Equal(ownRules, rulesText):
			t.OwnSame = true
		default:
			abs, _ := filepath.Abs(filepath.Join(dir, "docs/imports-deny.txt"))
			t.Own = runDeny(dir, ownScript, abs)
		}
		trees = append(trees, t)
	}
	fmt.Print(Report(trees, *rulesName, *wallName, *first, *verbose))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "shape:", err)
	os.Exit(1)
}

// readTree returns a module's non-test Go files as the go command sees its packages:
// testdata, vendor, folders starting with . or _ and nested modules left out.
func readTree(root string) ([]Source, error) {
	var out []Source
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, Source{Path: filepath.ToSlash(rel), Text: b})
		return nil
	})
	return out, err
}

// runWallclock runs a built wall-clock rule in dir over those of ClockDirs the tree has.
func runWallclock(dir, bin string) Wallclock {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return Wallclock{Why: err.Error()}
	}
	var args []string
	for _, d := range ClockDirs {
		if fi, err := os.Stat(filepath.Join(dir, d)); err == nil && fi.IsDir() {
			args = append(args, d)
		}
	}
	if len(args) == 0 {
		return Wallclock{Ran: true}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	exit := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Wallclock{Why: err.Error()}
		}
		exit = ee.ExitCode()
	}
	return ParseWallclock(string(out), exit)
}

// runDeny runs an import-rule script's text over dir. The script finds the module by
// cd-ing to its own folder's parent, so it is run as if it lay at dir/docs/imports-deny.sh
// (bash -c's $0; dir/docs must exist, as it does in every revision) and nothing is written
// into the tree.
func runDeny(dir string, script []byte, rules string) Deny {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Deny{Why: err.Error()}
	}
	cmd := exec.Command("bash", "-c", string(script), filepath.Join(abs, "docs", "imports-deny.sh"), rules)
	cmd.Dir = abs
	cmd.Env = os.Environ()
	if os.Getenv("CGO_CFLAGS") == "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-Wno-deprecated-declarations")
	}
	out, err := cmd.CombinedOutput()
	exit := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Deny{Why: err.Error()}
		}
		exit = ee.ExitCode()
	}
	return ParseDeny(string(out), exit)
}
