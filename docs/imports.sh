#!/usr/bin/env bash
# Prints docs/design.md's package diagram (mermaid) from `go list -deps`: every evalmesh
# package the evalmesh binary is built from, and an arrow for each direct import between
# them. Run from anywhere; paste the output over the diagram in docs/design.md §2, or run
# `docs/imports.sh --write` to replace it there. `--check` (run by `make check`) fails when
# the diagram in docs/design.md is not what the code imports.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --check || ${1:-} == --write ]]; then
	want=$(mktemp); trap 'rm -f "$want" "$want.doc"' EXIT
	"$0" >"$want"
	# The diagram is the first ```mermaid block of docs/design.md.
	have=$(awk '/^```mermaid$/ {f = 1} f {print} f && /^```$/ {exit}' docs/design.md)
	[[ "$have" == "$(cat "$want")" ]] && exit 0
	if [[ $1 == --check ]]; then
		echo "docs/design.md: the package diagram is not what the code imports; run docs/imports.sh --write" >&2
		exit 1
	fi
	awk -v want="$want" '
		!done && /^```mermaid$/ {skip = 1; while ((getline l < want) > 0) print l; next}
		skip && /^```$/ {skip = 0; done = 1; next}
		!skip {print}' docs/design.md >"$want.doc"
	cat "$want.doc" >docs/design.md
	exit 0
fi
mod=$(go list -m)
echo '```mermaid'
echo 'flowchart TD'
go list -deps -f '{{.ImportPath}} {{join .Imports " "}}' ./cmd/evalmesh |
	awk -v m="$mod/" '
	index($1, m) == 1 {
		p = substr($1, length(m) + 1)
		for (i = 2; i <= NF; i++) if (index($i, m) == 1) {
			q = substr($i, length(m) + 1)
			if (p ~ /^examples\/agents\// || q ~ /^examples\/agents\//) continue
			a = p; b = q; gsub(/\//, "_", a); gsub(/\//, "_", b)
			printf "  %s[\"%s\"] --> %s[\"%s\"]\n", a, p, b, q
		}
	}' | sort -u
echo '```'
