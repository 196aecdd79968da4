#!/usr/bin/env bash
# Ledger-scale benchmark (issue 12 item 7): `score` of AGENTS agents x 20 tasks x 3 seeds
# with ROUNDS bootstrap rounds (results parsed, ledger computed), with the Elo solver now
# in use ("cg": conjugate-gradient Newton steps above 400 players) and the one before
# ("dense": a Cholesky factorisation, O(P^3), at every Newton step). Each case runs in its
# own process so its peak RSS is its own. Columns: wall and CPU seconds, peak RSS, and the
# ratios to the issue's bound (5,000 agents, 100 rounds: <= 30 s, <= 2 GB).
# Usage: bench/ledger-scale.sh [-rounds N] [-solvers "cg dense"] [AGENTS ...]
#   (default: 500 1000, 100 rounds, both solvers; GOMAXPROCS defaults to 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=100
solvers="cg dense"
while [[ ${1:-} == -* ]]; do
	case $1 in
	-rounds) rounds=$2; shift 2 ;;
	-solvers) solvers=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(500 1000)
export GOMAXPROCS=${GOMAXPROCS:-2}
go test -c -o /tmp/ledger-scale.test ./scoring
echo "GOMAXPROCS=$GOMAXPROCS, 20 tasks x 3 seeds, $rounds bootstrap rounds; bound: 30 s, 2048 MB"
printf '%-7s %-6s %9s %9s %9s %11s %11s\n' agents solver wall_s cpu_s rss_MB wall/30s rss/2GB
for n in "${sizes[@]}"; do
	for s in $solvers; do
		line=$(cd scoring && EVALMESH_SCALE_AGENTS=$n EVALMESH_SCALE_ROUNDS=$rounds /tmp/ledger-scale.test \
			-test.run '^$' -test.bench "^BenchmarkLedgerScale/agents=$n/solver=$s\$" -test.benchtime 1x -test.timeout 2h | grep '^BenchmarkLedgerScale' || true)
		echo "$line" | awk -v n="$n" -v s="$s" '{
			for (i = 1; i <= NF; i++) { if ($(i+1) == "ns/op") w = $i / 1e9; if ($(i+1) == "cpu-s/op") c = $i; if ($(i+1) == "maxrss-MB") m = $i }
			printf "%-7s %-6s %9.2f %9.2f %9.0f %11.2f %11.2f\n", n, s, w, c, m, w / 30, m / 2048 }'
	done
done
