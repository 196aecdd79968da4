package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tree is one measured revision, as printed.
type Tree struct {
	Label string
	Shape Shape
	Deny  Deny      // under the rules handed to the tool (the same for every tree)
	Own   Deny      // under the tree's own docs/imports-deny.sh, if it differs from them
	Wall  Wallclock // its unmarked wall-clock uses, under the rule handed to the tool
	// OwnSame: the tree's own script and rules are those handed to the tool.
	OwnSame bool
}

// Report renders the trees side by side as markdown; rules names the rules of Deny, wall
// the rule of Wall, first is how many broken rules to list per tree, verbose lists every
// wall-clock use and every unmarked one.
func Report(trees []Tree, rules, wall string, first int, verbose bool) string {
	var b strings.Builder
	row := func(name string, cell func(t Tree) string) {
		b.WriteString("| " + name + " |")
		for _, t := range trees {
			b.WriteString(" " + cell(t) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("|  |")
	for _, t := range trees {
		b.WriteString(" " + t.Label + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(trees)) + "\n")
	row("`node`: non-test Go lines", func(t Tree) string { return thousands(t.Shape.NodeLines) })
	row("`node/...`: non-test Go lines", func(t Tree) string { return thousands(t.Shape.NodeTreeLines) })
	row("module: non-test Go lines", func(t Tree) string { return thousands(t.Shape.ModuleLines) })
	row("largest struct in `node/...` (fields; methods on T and *T)", func(t Tree) string { return t.Shape.Largest.String() })
	row("`Mesh`", func(t Tree) string {
		if len(t.Shape.Mesh) == 0 {
			return "none"
		}
		var s []string
		for _, m := range t.Shape.Mesh {
			s = append(s, m.String())
		}
		return strings.Join(s, "; ")
	})
	row("import rules ("+rules+"): packages breaking a rule", func(t Tree) string { return denyCell(t.Deny) })
	row("… rule subjects that are no package in the tree", func(t Tree) string {
		if !t.Deny.Ran {
			return "—"
		}
		if len(t.Deny.Missing) == 0 {
			return "0"
		}
		return strconv.Itoa(len(t.Deny.Missing)) + ": " + strings.Join(t.Deny.Missing, ", ")
	})
	row("import rules (its own docs/imports-deny.txt)", func(t Tree) string {
		if t.OwnSame {
			return "the same rules"
		}
		return denyCell(t.Own)
	})
	row("wall-clock references in non-test `node/...`, `protocol/...` and `attest/...`, marked or not (a context's timeout or deadline included)", func(t Tree) string { return strconv.Itoa(len(t.Shape.Clock)) })
	row("… unmarked ("+wall+": no `// wall clock: WHY`)", func(t Tree) string {
		if !t.Wall.Ran || t.Wall.Why != "" {
			return "not counted: " + firstLine(t.Wall.Why)
		}
		return strconv.Itoa(len(t.Wall.Unmarked))
	})
	for _, dir := range ClockDirs {
		row("… in `"+dir+"/...`", func(t Tree) string {
			n := 0
			for _, u := range t.Shape.Clock {
				if u.Pkg == dir || strings.HasPrefix(u.Pkg, dir+"/") {
					n++
				}
			}
			return strconv.Itoa(n)
		})
	}
	for _, fn := range clockFuncs(trees) {
		row("… `"+fn+"`", func(t Tree) string {
			n := 0
			for _, u := range t.Shape.Clock {
				if u.Func == fn {
					n++
				}
			}
			return strconv.Itoa(n)
		})
	}

	n := 0
	for _, t := range trees {
		n = max(n, len(t.Shape.Longest))
	}
	fmt.Fprintf(&b, "\nThe %d longest functions in non-test `node/...` (lines from `func` to its closing brace):\n\n| # |", n)
	for _, t := range trees {
		b.WriteString(" " + t.Label + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(trees)) + "\n")
	for i := 0; i < n; i++ {
		row(strconv.Itoa(i+1), func(t Tree) string {
			if i >= len(t.Shape.Longest) {
				return ""
			}
			f := t.Shape.Longest[i]
			return fmt.Sprintf("%d `%s` %s", f.Lines, f.Name, f.Pos)
		})
	}

	for _, t := range trees {
		denyDetail(&b, t.Label+", "+rules, t.Deny, first)
		if !t.OwnSame && t.Own.Ran {
			denyDetail(&b, t.Label+", its own rules", t.Own, first)
		}
		for _, e := range t.Shape.ParseErrors {
			fmt.Fprintf(&b, "\n%s: not parsed: %s\n", t.Label, e)
		}
	}
	if verbose {
		for _, t := range trees {
			fmt.Fprintf(&b, "\nWall-clock references, %s:\n\n", t.Label)
			for _, u := range t.Shape.Clock {
				fmt.Fprintf(&b, "- %s `%s`\n", u.Pos, u.Func)
			}
			fmt.Fprintf(&b, "\nUnmarked wall-clock references, %s (%s):\n\n", t.Label, wall)
			for _, u := range t.Wall.Unmarked {
				fmt.Fprintf(&b, "- %s\n", u)
			}
		}
	}
	return b.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func denyCell(d Deny) string {
	if !d.Ran {
		return d.Why
	}
	if d.Why != "" {
		return fmt.Sprintf("did not finish (exit %d; below)", d.Exit)
	}
	return fmt.Sprintf("%d (%d forbidden dependencies)", len(d.Broken), d.Forbidden())
}

func denyDetail(b *strings.Builder, title string, d Deny, first int) {
	if !d.Ran || (len(d.Broken) == 0 && d.Why == "") {
		return
	}
	fmt.Fprintf(b, "\nImport rules broken, %s (%d", title, len(d.Broken))
	if len(d.Broken) > first {
		fmt.Fprintf(b, ", the first %d", first)
	}
	b.WriteString("):\n\n")
	for i, br := range d.Broken {
		if i == first {
			break
		}
		more := ""
		if br.More > 0 {
			more = fmt.Sprintf(" (and %d more)", br.More)
		}
		fmt.Fprintf(b, "- `%s` depends on `%s`%s, against `%s`, through %s\n", br.Pkg, br.Dep, more, br.Rule, br.Path)
	}
	if d.Why != "" {
		fmt.Fprintf(b, "- exit %d, printed:\n\n```\n%s\n```\n", d.Exit, d.Why)
	}
}

// clockFuncs lists the wall-clock functions any tree uses, sorted.
func clockFuncs(trees []Tree) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range trees {
		for _, u := range t.Shape.Clock {
			if !seen[u.Func] {
				seen[u.Func] = true
				out = append(out, u.Func)
			}
		}
	}
	sort.Strings(out)
	return out
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
