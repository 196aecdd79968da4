package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Source is one non-test Go file of a tree: its slash path from the module root and its bytes.
type Source struct {
	Path string
	Text []byte
}

// Struct is one top-level struct type and the methods declared on it (T and *T) in its package.
type Struct struct {
	Pkg, Name   string
	Pos         string // file:line of the type's declaration
	Fields      int    // each name counts; an embedded field counts once
	Methods     int
	MethodFiles int // files the methods are declared in
}

func (s Struct) String() string {
	return fmt.Sprintf("%s.%s: %d fields, %d methods over %d files (%s)", s.Pkg, s.Name, s.Fields, s.Methods, s.MethodFiles, s.Pos)
}

// Func is one function or method declaration, its length from `func` to its closing brace.
type Func struct {
	Name  string // pkg.Name or pkg.(*T).Name
	Pos   string
	Lines int
}

// Shape is what the tool prints of one tree.
type Shape struct {
	NodeLines, NodeTreeLines, ModuleLines int
	Largest                               Struct   // the struct with the most fields in node/...
	Mesh                                  []Struct // every struct type named Mesh in node/...
	Longest                               []Func   // the longest functions in node/..., longest first
	Clock                                 []Use    // wall-clock uses in node/..., protocol/... and attest/..., marked or not
	ParseErrors                           []string
}

// Use is one reference to a wall-clock function of package time or context.
type Use struct {
	Func string // time.Now, context.WithTimeout, ...
	Pkg  string
	Pos  string
}

// wallClock is, by import path, what reads or waits on the wall clock (a context's
// timeout or deadline is a wall-clock timer); anything else in package time (durations,
// formatting, time.Unix) is a value. The same functions as docs/wallclock.go's.
var wallClock = map[string]map[string]bool{
	"time": {"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
		"NewTimer": true, "NewTicker": true, "Tick": true, "Sleep": true},
	"context": {"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true,
		"WithDeadlineCause": true},
}

// ClockDirs are the folders whose wall-clock uses are counted, those `make check` runs
// docs/wallclock.go over.
var ClockDirs = []string{"node", "protocol", "attest"}

// Lines counts lines as wc -l does (newlines), plus a last line without one.
func Lines(b []byte) int {
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// under says whether slash path p is in package dir or below it.
func under(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// Measure computes the shape of a tree's non-test Go files; top is how many long functions
// to keep.
func Measure(files []Source, top int) Shape {
	var s Shape
	fset := token.NewFileSet()
	type pkgFiles struct{ files []*ast.File }
	pkgs := map[string]*pkgFiles{}
	var order []string
	for _, f := range files {
		n := Lines(f.Text)
		s.ModuleLines += n
		inNode, inClock := under(f.Path, "node"), false
		for _, d := range ClockDirs {
			inClock = inClock || under(f.Path, d)
		}
		if inNode {
			s.NodeTreeLines += n
			if path.Dir(f.Path) == "node" {
				s.NodeLines += n
			}
		}
		if !inClock {
			continue
		}
		af, err := parser.ParseFile(fset, f.Path, f.Text, parser.SkipObjectResolution)
		if err != nil {
			s.ParseErrors = append(s.ParseErrors, err.Error())
			continue
		}
		dir := path.Dir(f.Path)
		s.Clock = append(s.Clock, clockUses(fset, af, dir)...)
		if !inNode {
			continue
		}
		if pkgs[dir] == nil {
			pkgs[dir] = &pkgFiles{}
			order = append(order, dir)
		}
		pkgs[dir].files = append(pkgs[dir].files, af)
	}
	sort.Strings(order)
	var funcs []Func
	for _, dir := range order {
		structs := structsOf(fset, dir, pkgs[dir].files)
		for _, st := range structs {
			if st.Name == "Mesh" {
				s.Mesh = append(s.Mesh, st)
			}
			if better(st, s.Largest) {
				s.Largest = st
			}
		}
		for _, af := range pkgs[dir].files {
			funcs = append(funcs, funcsOf(fset, dir, af)...)
		}
	}
	sort.SliceStable(funcs, func(i, j int) bool {
		if funcs[i].Lines != funcs[j].Lines {
			return funcs[i].Lines > funcs[j].Lines
		}
		return funcs[i].Pos < funcs[j].Pos
	})
	if len(funcs) > top {
		funcs = funcs[:top]
	}
	s.Longest = funcs
	return s
}

// better orders structs by fields, then methods, then name, so the pick does not depend on
// the order files were read in.
func better(a, b Struct) bool {
	if a.Fields != b.Fields {
		return a.Fields > b.Fields
	}
	if a.Methods != b.Methods {
		return a.Methods > b.Methods
	}
	return a.Pkg+"."+a.Name < b.Pkg+"."+b.Name
}

func position(fset *token.FileSet, p token.Pos) string {
	pos := fset.Position(p)
	return pos.Filename + ":" + strconv.Itoa(pos.Line)
}

// structsOf returns the package's top-level struct types with their methods counted.
func structsOf(fset *token.FileSet, dir string, files []*ast.File) []Struct {
	byName := map[string]*Struct{}
	var names []string
	methodFiles := map[string]map[string]bool{}
	for _, af := range files {
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || ts.Assign.IsValid() {
					continue
				}
				n := 0
				for _, f := range st.Fields.List {
					if len(f.Names) == 0 {
						n++
					} else {
						n += len(f.Names)
					}
				}
				byName[ts.Name.Name] = &Struct{Pkg: dir, Name: ts.Name.Name, Pos: position(fset, ts.Pos()), Fields: n}
				names = append(names, ts.Name.Name)
			}
		}
	}
	for _, af := range files {
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			_, recv := receiver(fd.Recv.List[0].Type)
			st := byName[recv]
			if st == nil {
				continue
			}
			st.Methods++
			if methodFiles[recv] == nil {
				methodFiles[recv] = map[string]bool{}
			}
			methodFiles[recv][fset.Position(fd.Pos()).Filename] = true
		}
	}
	out := make([]Struct, 0, len(names))
	for _, n := range names {
		st := byName[n]
		st.MethodFiles = len(methodFiles[n])
		out = append(out, *st)
	}
	return out
}

// receiver returns whether a receiver type is a pointer and its type's name, type
// parameters dropped (T, *T, T[K], *T[K]).
func receiver(e ast.Expr) (ptr bool, name string) {
	if st, ok := e.(*ast.StarExpr); ok {
		ptr, e = true, st.X
	}
	switch t := e.(type) {
	case *ast.IndexExpr:
		e = t.X
	case *ast.IndexListExpr:
		e = t.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return ptr, id.Name
	}
	return ptr, ""
}

func funcsOf(fset *token.FileSet, dir string, af *ast.File) []Func {
	var out []Func
	for _, d := range af.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			ptr, recv := receiver(fd.Recv.List[0].Type)
			if ptr {
				name = "(*" + recv + ")." + name
			} else {
				name = recv + "." + name
			}
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		out = append(out, Func{Name: path.Base(dir) + "." + name, Pos: position(fset, fd.Pos()), Lines: end.Line - start.Line + 1})
	}
	return out
}

// clockUses finds every reference to a wall-clock function of package time or context
// (called or passed as a value), under whatever name the file imports them as, marked
// `// wall clock: WHY` or not.
func clockUses(fset *token.FileSet, af *ast.File, dir string) []Use {
	pkgs := map[string]string{} // the name a file imports time or context as → its path
	for _, im := range af.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if wallClock[p] == nil {
			continue
		}
		name := p
		if im.Name != nil {
			name = im.Name.Name
		}
		if name != "_" && name != "." {
			pkgs[name] = p
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	var out []Use
	ast.Inspect(af, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && wallClock[pkgs[id.Name]][sel.Sel.Name] {
			out = append(out, Use{Func: pkgs[id.Name] + "." + sel.Sel.Name, Pkg: dir, Pos: position(fset, sel.Pos())})
		}
		return true
	})
	return out
}

// Wallclock is one run of a wall-clock rule (docs/wallclock.go of some revision, built)
// over a tree's ClockDirs.
type Wallclock struct {
	Ran      bool
	Why      string   // why it did not run, or what it printed that is no use
	Unmarked []string // "file:line: time.Now", as it listed them
}

// ParseWallclock reads what docs/wallclock.go printed and its exit status: 0 is no
// unmarked use; 1 lists them, one "  file:line: pkg.Func" line each, then says why.
func ParseWallclock(out string, exit int) Wallclock {
	w := Wallclock{Ran: true}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) == 2 && strings.HasSuffix(f[0], ":") {
			w.Unmarked = append(w.Unmarked, strings.TrimSpace(line))
		}
	}
	if exit == 0 && out != "" || exit == 1 && len(w.Unmarked) == 0 || exit != 0 && exit != 1 {
		w.Why = fmt.Sprintf("exit %d: %s", exit, strings.TrimSpace(out))
	}
	return w
}

// Deny is one run of an import-rule check (docs/imports-deny.sh) over a tree.
type Deny struct {
	Ran     bool   // false: no script to run
	Why     string // why it did not run, or what it printed that is neither a rule nor a subject
	Exit    int
	Broken  []Broken
	Missing []string // rule subjects that are no package in the tree
}

// Broken is one package that breaks one rule.
type Broken struct {
	Rule     string // the rule's text
	Pkg, Dep string // the package and the nearest forbidden package it depends on
	More     int    // further forbidden packages it depends on
	Path     string // the shortest import path to Dep
}

// Forbidden is the number of (package, forbidden dependency) pairs across broken rules.
func (d Deny) Forbidden() int {
	n := 0
	for _, b := range d.Broken {
		n += 1 + b.More
	}
	return n
}

var (
	brokenRe  = regexp.MustCompile(`^\S+:\d+: (\S+) depends on (\S+)(?: \(and (\d+) more\))?, which the rule$`)
	missingRe = regexp.MustCompile(`: rules name (\S+), which is no package in this tree$`)
)

// ParseDeny reads what docs/imports-deny.sh printed: four lines per broken rule (the rule
// and the path indented by a tab), one per missing subject. Anything else (a go list error)
// is kept in Why so it is not mistaken for a clean run.
func ParseDeny(out string, exit int) Deny {
	d := Deny{Ran: true, Exit: exit}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var other []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := brokenRe.FindStringSubmatch(l); m != nil && i+3 < len(lines) {
			b := Broken{Pkg: m[1], Dep: m[2], Rule: strings.Join(strings.Fields(lines[i+1]), " "), Path: strings.TrimSpace(lines[i+3])}
			if m[3] != "" {
				b.More, _ = strconv.Atoi(m[3])
			}
			d.Broken = append(d.Broken, b)
			i += 3
			continue
		}
		if m := missingRe.FindStringSubmatch(l); m != nil {
			d.Missing = append(d.Missing, m[1])
			continue
		}
		if strings.TrimSpace(l) != "" {
			other = append(other, l)
		}
	}
	if len(other) > 0 {
		d.Why = strings.Join(other, "\n")
	}
	return d
}
