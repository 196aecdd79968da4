#!/usr/bin/env bash
# Claim-protocol simulator benchmark (issue 9): the goal network (20 nodes, 5 labs, 2,000
# slots, 5 % loss, 30 % of the nodes cut off for 10 virtual minutes, 2 crashes) over several
# seeds, checked against the bounds, then networks of 50 and 200 nodes with the same slots
# per node (100) to show how messages per slot and memory grow. One process per run, on one
# core (GOMAXPROCS=1: the simulator is single-threaded). Speed is virtual seconds per CPU
# second (user+system) and per wall second; on a shared machine the CPU figure is the fair
# one.
# Usage: bench/sim.sh [-seeds "1 2 3"] [-large]   (run from anywhere; -large adds 200 nodes)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="1 2 3 4 5 7"
large=0
while [[ $# -gt 0 ]]; do
	case $1 in
	-seeds) seeds=$2; shift 2 ;;
	-large) large=1; shift ;;
	*) echo "usage: bench/sim.sh [-seeds \"1 2 3\"] [-large]" >&2; exit 2 ;;
	esac
done
bin=$(mktemp -d)/evalmesh
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/evalmesh
export GOMAXPROCS=1
row() { # nodes slots seed
	"$bin" sim --nodes "$1" --labs 5 --slots "$2" --loss 0.05 --partition 0.3:10m --crash 2 --seed "$3" --json --wall 2>/dev/null |
		jq -r --arg n "$1" --arg seed "$3" '[
			$n, .slots, $seed, .lost_slots, .duplicate_runs, (100 * .duplicate_runs / .slots),
			.claim_to_start_ms.p50, .claim_to_start_ms.p99, .messages_per_slot, .deliveries_per_slot,
			.equivocations, .rescored_ok, .virtual_seconds, .cpu_seconds, (.virtual_seconds / .cpu_seconds),
			.wall_seconds, (.virtual_seconds / .wall_seconds), .max_rss_mib,
			(if .lost_slots == 0 and (100 * .duplicate_runs / .slots) <= 0.5 and .claim_to_start_ms.p99 <= 1000
			    and (.virtual_seconds / .cpu_seconds) >= 1000 then "ok" else "MISSED" end)
		] | @tsv'
}
{
	printf "nodes\tslots\tseed\tlost\tdup\tdup%%\tc2s_p50_ms\tc2s_p99_ms\tmsgs/slot\tdeliv/slot\tequivoc\trescored_ok\tvirtual_s\tcpu_s\tx_cpu\twall_s\tx_wall\trss_MiB\tbounds\n"
	for s in $seeds; do row 20 2000 "$s"; done
	row 50 5000 7
	if [[ $large == 1 ]]; then row 200 20000 7; fi
} | awk -F'\t' 'NR == 1 { print; next } {
	printf "%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f\t%.0f\t%.2f\t%.1f\t%s\t%s\t%.0f\t%.2f\t%.0f\t%.2f\t%.0f\t%s\t%s\n",
		$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19 }' | column -t -s $'\t'
echo "bounds (issue 9): lost 0, dup <= 0.5 % of slots, claim->start p99 <= 1000 ms virtual, >= 1000x real time on one core"
