#!/usr/bin/env bash
# The figures of the code's shape that issue 42's "Show" asks for (bench/shape/main.go says
# what each is), for one or more git revisions side by side:
#   bench/shape.sh [-v] [REV...]      (default HEAD; e.g. bench/shape.sh ec885cf HEAD)
# Each revision is checked out into a temporary git worktree, removed at the end. Every
# revision's import graph is judged by HEAD's docs/imports-deny.{sh,txt} (the same rules for
# old and new, also for a revision that predates them), and by its own where they differ;
# every revision's unmarked wall-clock uses are listed by HEAD's docs/wallclock.go.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
flags=()
while [ $# -gt 0 ]; do case "$1" in -v) flags+=(-v); shift;; -*) echo "usage: $0 [-v] [REV...]" >&2; exit 2;; *) break;; esac; done
[ $# -gt 0 ] || set -- HEAD
work=$(mktemp -d)
trees=()
cleanup() {
	for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT
head=$(git rev-parse --short HEAD)
git show HEAD:docs/imports-deny.sh >"$work/imports-deny.sh"
git show HEAD:docs/imports-deny.txt >"$work/imports-deny.txt"
git show HEAD:docs/wallclock.go >"$work/wallclock.go"
go build -o "$work/shape" ./bench/shape
go build -o "$work/wallclock" "$work/wallclock.go"
args=()
i=0
for rev in "$@"; do
	i=$((i + 1))
	dir=$work/tree$i
	git worktree add --detach "$dir" "$rev" >/dev/null 2>&1 || { echo "$0: no revision $rev" >&2; exit 1; }
	trees+=("$dir")
	args+=("$(git log -1 --date=format:'%Y-%m-%d %H:%M' --format='%h (%ad)' "$rev")=$dir")
done
echo "# $(date -u +%FT%TZ) bench/shape.sh $*; import rules: docs/imports-deny.txt at HEAD $head; wall-clock rule: docs/wallclock.go at HEAD $head"
echo
"$work/shape" "${flags[@]}" -deny-script "$work/imports-deny.sh" -deny-rules "$work/imports-deny.txt" -deny-name "HEAD's $head" -wallclock "$work/wallclock" -wallclock-name "HEAD's docs/wallclock.go" "${args[@]}"
