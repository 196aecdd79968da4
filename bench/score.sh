#!/usr/bin/env bash
# Ledger benchmark (issue 3): 1,000,000 synthetic results (200 agents x 100 tasks x 50
# seeds, ~40 % invalid runs, half the tasks lower-is-better) scored with 100 bootstrap
# rounds, beside the floor — parsing the same JSONL and sorting the results — in the same
# run. Also a small 4,000-result case. Wall time is the best of N runs (a shared machine
# only ever slows a run down); cpu is user+system seconds of the process per run; rss is
# the largest peak RSS (VmHWM, reset before each) of the benchmark process over the runs.
# Usage: bench/score.sh [-count N] [-score.maxresults N]   (run from anywhere; GOMAXPROCS
# defaults to 2; -score.maxresults 4000 runs only the small case)
set -euo pipefail
cd "$(dirname "$0")/.."
count=3
if [[ ${1:-} == -count ]]; then count=$2; shift 2; fi
export GOMAXPROCS=${GOMAXPROCS:-2}
out=$(go test ./scoring -run '^$' -bench '^BenchmarkScore$' -benchtime 1x -count "$count" -timeout 30m -args "$@")
echo "$out" | grep -E '^(goos|goarch|cpu):' || true
echo "GOMAXPROCS=$GOMAXPROCS, best of $count"
echo "$out" | awk '
/^BenchmarkScore\// {
	split($1, p, "/"); size = p[2]; kind = p[3]; sub(/-[0-9]+$/, "", kind); sub(/results=/, "", size)
	ns = $3; cpu = 0
	rss = 0
	for (i = 1; i <= NF; i++) { if ($(i+1) == "cpu-s/op") cpu = $i; if ($(i+1) == "peak-MiB") rss = $i }
	if (!((size, kind) in wall) || ns < wall[size, kind]) wall[size, kind] = ns
	if (!((size, kind) in cput) || cpu < cput[size, kind]) cput[size, kind] = cpu
	if (rss > peak[size, kind]) peak[size, kind] = rss
	sizes[size] = 1
}
END {
	printf "%-9s %10s %10s %11s %11s %11s %11s %9s %9s\n", "results", "floor s", "ledger s", "wall ratio", "floor cpu", "ledger cpu", "cpu ratio", "floor MiB", "ledger MiB"
	for (s in sizes) {
		f = wall[s, "floor"] / 1e9; l = wall[s, "ledger"] / 1e9
		printf "%-9s %10.3f %10.3f %11.2f %11.3f %11.3f %11.2f %9.0f %9.0f\n", s, f, l, l / f, cput[s, "floor"], cput[s, "ledger"], cput[s, "ledger"] / cput[s, "floor"], peak[s, "floor"], peak[s, "ledger"]
	}
}' | sort -n
