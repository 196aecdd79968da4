#!/usr/bin/env bash
# The claim goals with a dishonest lab in the mix (issue 43): the goal network (20 nodes,
# 5 labs, 2,000 slots, 5 % loss, 30 % of the nodes cut off for 10 virtual minutes, 2
# crashes) with `--dishonest-labs 1` — one lab of five forges infra releases of every slot,
# and of each slot it hears another lab run either fabricates a result (a slot it never
# claimed) or signs claim records of the attempts it hears renewed and never runs them —
# over seeds, with signed claim records (the default, as network create writes) and
# without, then with the partition moved to the campaign's tail (30 % of the nodes cut off
# for 30 minutes from 9 h, where nodes go idle and lapsed leases turn into duplicates),
# reported apart. Each row is checked against the goals, each ratio is measured / bound.
# One process per run on one core (GOMAXPROCS=1).
# Usage: bench/sim-dishonest.sh [-seeds "1 2 3"]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="1 2 3"
while [[ $# -gt 0 ]]; do
	case $1 in
	-seeds) seeds=$2; shift 2 ;;
	*) echo "usage: bench/sim-dishonest.sh [-seeds \"1 2 3\"]" >&2; exit 2 ;;
	esac
done
bin=$(mktemp -d)/evalmesh
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/evalmesh
export GOMAXPROCS=1
row() { # label seed flags...
	local label=$1 seed=$2
	shift 2
	"$bin" sim --dishonest-labs 1 --loss 0.05 --crash 2 --seed "$seed" "$@" --json --wall 2>/dev/null |
		jq -r --arg l "$label" --arg seed "$seed" '
			((.duplicate_runs - .duplicate_runs_partitioned) * 100 / .slots) as $dup |
			[$l, $seed, .lost_slots, .duplicate_runs, .duplicate_runs_partitioned, $dup, ($dup / 0.5),
			 .claim_to_start_ms.p99, (.claim_to_start_ms.p99 / 1000), .forged_releases, .fabricated_results,
			 (.squat_claims // 0), (.given_up_to_dishonest // 0), .aborted_by_fabricated, .virtual_seconds,
			 .cpu_seconds, .max_rss_mib,
			 (if .lost_slots == 0 and $dup <= 0.5 and .claim_to_start_ms.p99 <= 1000 then "ok" else "MISSED" end)] | @tsv'
}
{
	printf "network\tseed\tlost\tdup\tdup_in_partition\tdup_outside_%%\t/0.5%%\tc2s_p99_ms\t/1000ms\tforged_rel\tfabricated\tsquats\tgiven_up_to_squat\taborted\tvirtual_s\tcpu_s\trss_MiB\tgoals\n"
	for s in $seeds; do row "claim-records" "$s"; done
	for s in $seeds; do row "no-records" "$s" --claim-records=false; done
	for s in $seeds; do row "records,tail-partition" "$s" --partition 0.3:30m@9h; done
} | awk -F'\t' 'NR == 1 { print; next } {
	printf "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.2f\t%s\t%s\n",
		$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18 }' | column -t -s $'\t'
echo "goals (issue 43): lost 0, duplicate runs outside partitions <= 0.5 % of slots, claim->start p99 <= 1000 ms virtual; ratios are measured / bound"
