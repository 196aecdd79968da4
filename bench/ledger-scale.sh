#!/usr/bin/env bash
# Ledger-scale benchmark (issue 12 item 7): `score` of AGENTS agents x 20 tasks x 3 seeds
# (results parsed, ledger computed) under each Elo bootstrap policy:
#   tasks-linearised  the network-document option (docs/scoring.md §4): tasks resampled, one
#                     linear step from the MLE per round; ROUNDS rounds (default 100);
#   games             the default (AIRS-Bench's): games resampled, ratings refitted every
#                     round; GAMES_ROUNDS rounds (default 1: each round costs ~6 CPU-s at
#                     5,000 agents, so 100 would take ~10 minutes of two cores).
# The default policy can also be run with the solver before the conjugate-gradient Newton
# step ("dense": a Cholesky factorisation, O(P^3), at every Newton step) with -solvers.
# Each case runs in its own process so its peak RSS is its own. Columns: wall and CPU
# seconds (user+sys of the process), peak RSS, the ratios to the issue's bound (5,000
# agents, 100 rounds: <= 30 s, <= 2 GB), and the load average when the case ended (the
# machine is shared: wall time depends on the neighbours, CPU time does not).
# Usage: bench/ledger-scale.sh [-rounds N] [-games-rounds N] [-boots "tasks-linearised games"]
#        [-solvers "cg dense"] [AGENTS ...]   (default: 5000; GOMAXPROCS defaults to 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=100
grounds=1
boots="tasks-linearised games"
solvers="cg"
while [[ ${1:-} == -* ]]; do
	case $1 in
	-rounds) rounds=$2; shift 2 ;;
	-games-rounds) grounds=$2; shift 2 ;;
	-boots) boots=$2; shift 2 ;;
	-solvers) solvers=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(5000)
export GOMAXPROCS=${GOMAXPROCS:-2}
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
go test -c -o /tmp/ledger-scale.test ./scoring
echo "GOMAXPROCS=$GOMAXPROCS, 20 tasks x 3 seeds; bound: 100 rounds in 30 s and 2048 MB"
printf '%-7s %-17s %-6s %6s %9s %9s %9s %9s %9s %s\n' agents elo_bootstrap solver rounds wall_s cpu_s rss_MB wall/30s rss/2GB load
for n in "${sizes[@]}"; do
	for b in $boots; do
		ss=$solvers r=$rounds
		if [[ $b == tasks-linearised ]]; then ss=cg; fi # the dense solver is a comparison for the default only
		if [[ $b == games ]]; then r=$grounds; fi
		for s in $ss; do
			line=$(cd scoring && EVALMESH_SCALE_AGENTS=$n EVALMESH_SCALE_ROUNDS=$r /tmp/ledger-scale.test \
				-test.run '^$' -test.bench "^BenchmarkLedgerScale/agents=$n/boot=$b/solver=$s\$" -test.benchtime 1x -test.timeout 2h | grep '^BenchmarkLedgerScale' || true)
			load=$(cut -d' ' -f1 /proc/loadavg)
			echo "$line" | awk -v n="$n" -v b="$b" -v s="$s" -v r="$r" -v load="$load" '{
				for (i = 1; i <= NF; i++) { if ($(i+1) == "ns/op") w = $i / 1e9; if ($(i+1) == "cpu-s/op") c = $i; if ($(i+1) == "maxrss-MB") m = $i }
				printf "%-7s %-17s %-6s %6s %9.2f %9.2f %9.0f %9.2f %9.2f %s\n", n, b, s, r, w, c, m, w / 30, m / 2048, load }'
		done
	done
done
