#!/usr/bin/env bash
# Prints docs/design.md's package diagram (mermaid) from `go list -deps`: every evalmesh
# package the evalmesh binary is built from, and an arrow for each direct import between
# them. Run from anywhere; paste the output over the diagram in docs/design.md §2.
set -euo pipefail
cd "$(dirname "$0")/.."
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
