#!/usr/bin/env bash
# Dead-holder takeover (issue 45 point 4): how soon a dead node's slots are free again, at
# what cost in claim messages and duplicate runs, for lease-only and dead-after options. The
# goal network of bench/sim.sh (20 nodes, 5 labs, 2,000 slots, 5 % loss, 30 % of the nodes
# cut off for 10 virtual minutes) with 2 nodes that crash for good (--crash-down 24h), each
# option over the same seeds; figures are means over the seeds, takeover max the worst.
# Usage: bench/sim-takeover.sh [-seeds "1 2 3"] [-slots 2000]   (output: the table in
# docs/protocol-claims.md; fewer slots only for a smoke run)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="1 2 3"
slots=2000
while [[ $# -gt 0 ]]; do
	case $1 in
	-seeds) seeds=$2; shift 2 ;;
	-slots) slots=$2; shift 2 ;;
	*) echo "usage: bench/sim-takeover.sh [-seeds \"1 2 3\"] [-slots 2000]" >&2; exit 2 ;;
	esac
done
bin=$(mktemp -d)/evalmesh
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/evalmesh
export GOMAXPROCS=1
option() { # label, then sim flags
	local label=$1
	shift
	for s in $seeds; do
		"$bin" sim --slots "$slots" --crash 2 --crash-down 24h --seed "$s" --json "$@" 2>/dev/null
	done | jq -rs --arg name "$label" '[
		$name,
		((map(.messages_per_slot) | add / length * 100 | round) / 100),
		((map(.takeover_s.p50) | add / length) | round),
		(map(.takeover_s.max) | max | round),
		((map(.duplicate_runs) | add / length * 10 | round) / 10),
		(map(.lost_slots) | add),
		((map(.alive_per_slot) | add / length * 10 | round) / 10)
	] | @tsv'
}
{
	printf "option\tclaim msgs/slot\ttakeover p50 s\ttakeover max s\tduplicate runs\tlost slots\talive msgs/slot\n"
	option "lease 10m (before)" --dead-after -1s
	option "lease 5m" --lease 5m --dead-after -1s
	option "lease 2m" --lease 2m --dead-after -1s
	option "lease 10m, dead-after 2m, no heads" --dead-after 2m --alive-every -1s
	option "lease 10m, dead-after 1m (heads)" --dead-after 1m
	option "lease 10m, dead-after 2m (heads; default)" --dead-after 2m
	option "lease 10m, dead-after 3m (heads)" --dead-after 3m
} | column -t -s $'\t'
