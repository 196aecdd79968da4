//go:build ignore

// Wallclock fails listing every direct use of the wall clock (time.Now, Since, Until,
// After, AfterFunc, NewTimer, NewTicker, Tick, Sleep, and a context's deadline:
// context.WithTimeout, WithDeadline and their Cause forms; a call or a function value) in
// the non-test Go files under the folders it is given, unless its line ends with a
// `// wall clock: WHY` comment. Arithmetic on time.Time values reads no clock and is not
// listed. Time that decides something (a timer, a ticker, an idle
// cancel, a deadline the code checks itself) comes from the injected clock
// (internal/clock, docs/design.md §6 "The daemon's main loop"), so tests move it on instead
// of waiting; what the kernel enforces (a stream's deadline) or only measures (a duration
// logged or reported) stays on the wall clock, marked. Run by `make check`:
//
//	go run docs/wallclock.go node protocol attest
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// wallFuncs are, by import path, the functions that read the wall clock or make timers on
// it: a context's timeout or deadline is a wall-clock timer that cancels it.
var wallFuncs = map[string]map[string]bool{
	"time": {"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
		"NewTimer": true, "NewTicker": true, "Tick": true, "Sleep": true},
	"context": {"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true,
		"WithDeadlineCause": true},
}

// mark is the comment that keeps a use on the wall clock; it must say why.
var mark = regexp.MustCompile(`^//\s*wall clock:\s*\S`)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run docs/wallclock.go DIR...")
		os.Exit(2)
	}
	var bad []string
	for _, root := range os.Args[1:] {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			found, err := unmarked(path)
			bad = append(bad, found...)
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "wallclock:", err)
			os.Exit(2)
		}
	}
	if len(bad) == 0 {
		return
	}
	sort.Strings(bad)
	fmt.Println("wall clock used directly where the injected clock belongs:")
	for _, b := range bad {
		fmt.Println("  " + b)
	}
	fmt.Println(`Time that decides something (a timer, a ticker, an idle cancel, a deadline the code
checks itself, a context's timeout that bounds a wait or a fetch budget) must come from the
injected clock: Options.Clock / MeshOptions.Clock (internal/clock; clock.WithTimeout for a
context), or a now func the caller passes, so tests run it on a fake clock.
Only a deadline the kernel or a peer enforces (SetDeadline on a stream, a dial, an HTTP
round trip) or a duration measured for a log line or a metric may stay on the wall clock:
end that line with
"// wall clock: <why>". See docs/design.md §6 (internal/clock).`)
	os.Exit(1)
}

// unmarked lists the uses of wallFuncs in the file at path whose line carries no mark.
func unmarked(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]map[string]bool{} // a name this file imports time or context as → its wallFuncs
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if funcs := wallFuncs[p]; funcs != nil {
			switch {
			case imp.Name == nil:
				names[p] = funcs
			case imp.Name.Name != "_" && imp.Name.Name != ".":
				names[imp.Name.Name] = funcs
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	marked := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if mark.MatchString(c.Text) {
				marked[fset.Position(c.Slash).Line] = true
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && names[id.Name][sel.Sel.Name] {
			if pos := fset.Position(sel.Pos()); !marked[pos.Line] {
				out = append(out, fmt.Sprintf("%s:%d: %s.%s", pos.Filename, pos.Line, id.Name, sel.Sel.Name))
			}
		}
		return true
	})
	return out, nil
}
