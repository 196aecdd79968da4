#!/usr/bin/env bash
# Checks the import rules of docs/imports-deny.txt (docs/design.md §2) against `go list -deps`
# and fails naming, for each broken rule, the package, what it must not depend on and the
# shortest import path by which it arrives. Run by `make check`; run from anywhere.
# docs/imports.sh draws the graph; this says which edges the design forbids, so a broken rule
# fails the build instead of being redrawn into the diagram.
set -euo pipefail
cd "$(dirname "$0")/.."
rules=${1:-docs/imports-deny.txt}
mod=$(go list -m)

# The subjects of the rules, as go list patterns (./runner/... for runner/...).
subjects=$(awk '{sub(/#.*/, "")} NF >= 2 && $1 != "set" {print "./" $1}' "$rules" | sort -u)
# A subject that is not in the tree fails the check (a renamed package must not silently
# drop its rules), after the other rules are checked.
missing=0 present=
for s in $subjects; do
	d=${s%/...}
	if [[ -d $d ]]; then present+=" $s"; else
		echo "$rules: rules name ${d#./}, which is no package in this tree"
		missing=1
	fi
done

graph=$(mktemp)
trap 'rm -f "$graph"' EXIT
# One line per package the subjects are built from: path, std|mod|out, its direct imports.
# shellcheck disable=SC2086
go list -deps -f '{{.ImportPath}} {{if .Standard}}std{{else}}-{{end}} {{join .Imports " "}}' $present |
	awk -v m="$mod" '$2 == "-" {$2 = (index($1, m "/") == 1 || $1 == m) ? "mod" : "out"} {print}' >"$graph"

awk -v m="$mod" -v rules="$rules" '
function full(p) { return (p ~ /^[^\/]*\./) ? p : m "/" p }
# match(d, pat): pat is a full path, X/... or the keyword outside.
function matches(d, pat) {
	if (pat == "outside") return kind[d] == "out"
	if (pat ~ /\/\.\.\.$/) { pat = substr(pat, 1, length(pat) - 4); return d == pat || index(d, pat "/") == 1 }
	return d == pat
}
# expand(list): the patterns of a rule with set names replaced by their members, recursively.
function expand(list,   n, a, i, out) {
	n = split(list, a, " "); out = ""
	for (i = 1; i <= n; i++) out = out " " ((a[i] in set) ? expand(set[a[i]]) : (a[i] == "outside" || a[i] == "-") ? a[i] : full(a[i]))
	return out
}
function short(p) { return index(p, m "/") == 1 ? substr(p, length(m) + 2) : p }
FNR == NR {
	sub(/#.*/, "")
	if (NF == 0) next
	if ($1 == "set") { v = ""; for (i = 3; i <= NF; i++) v = v " " $i; set[$2] = v; next }
	if (NF < 3 || ($2 != "!->" && $2 != "only->")) { printf "%s:%d: want PKG !-> PATTERN... or PKG only-> PATTERN...\n", rules, FNR > "/dev/stderr"; bad = 1; next }
	nr++; subj[nr] = $1; verb[nr] = $2; line[nr] = FNR; text[nr] = $0
	v = ""; for (i = 3; i <= NF; i++) v = v " " $i; pats[nr] = v
	next
}
{ kind[$1] = $2; v = ""; for (i = 3; i <= NF; i++) v = v " " $i; imps[$1] = v; all[++np] = $1 }
END {
	for (r = 1; r <= nr; r++) {
		np2 = split(expand(pats[r]), pat, " ")
		for (k = 1; k <= np; k++) {
			s = all[k]
			if (kind[s] != "mod" || !matches(s, full(subj[r]))) continue
			# Breadth first from s, so the first forbidden package found is a nearest one and
			# parent[] spells a shortest path to it.
			delete seen; delete parent
			qh = 1; qt = 1; q[1] = s; seen[s] = 1; count = 0; first = ""
			while (qh <= qt) {
				p = q[qh++]
				n = split(imps[p], im, " ")
				for (i = 1; i <= n; i++) {
					d = im[i]
					if (d in seen) continue
					seen[d] = 1; parent[d] = p; q[++qt] = d
					hit = 0
					if (verb[r] == "!->") {
						for (j = 1; j <= np2; j++) if (matches(d, pat[j])) { hit = 1; break }
					} else if (kind[d] == "mod") {
						hit = 1
						for (j = 1; j <= np2; j++) if (pat[j] != "-" && matches(d, pat[j])) { hit = 0; break }
					}
					if (hit) { count++; if (first == "") first = d }
				}
			}
			if (count == 0) continue
			path = short(first); for (d = first; d != s; ) { d = parent[d]; path = short(d) " -> " path }
			printf "%s:%d: %s depends on %s%s, which the rule\n\t%s\nforbids; it arrives through\n\t%s\n", rules, line[r], short(s), short(first), (count > 1 ? " (and " (count - 1) " more)" : ""), text[r], path
			bad = 1
		}
	}
	exit bad
}' "$rules" "$graph" || exit 1
exit $missing
