#!/usr/bin/env bash
# The network benchmark of issue 11: a campaign of short slots over three daemons (the
# network demo: three labs' daemons on 127.0.0.1 in one process, real libp2p, gossipsub and
# transfer, process executor). Prints slots per second, duplicate runs, the time from the
# campaign done to all roots equal, and evalmesh's CPU beside the agents'.
#   bench/campaign.sh [-seeds 25]      (25 seeds: 3 tasks x 4 agents x 25 = 300 slots)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=25
while [ $# -gt 0 ]; do case "$1" in -seeds) seeds=$2; shift 2;; *) echo "usage: $0 [-seeds N]" >&2; exit 2;; esac; done
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
bin=$(mktemp -d)/evalmesh
go build -o "$bin" ./cmd/evalmesh
out=$(mktemp)
"$bin" demo --seeds "$seeds" --json > "$out"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
slots, secs = r["slots"], r["seconds"]
roots = {n["ledger_root"] for n in r["nodes"]}
print("| nodes | slots | wall s | slots/s | claim->start p50/p99 ms | duplicate runs | done -> roots equal s | evalmesh CPU s | agents CPU s | evalmesh share | roots equal |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
share = r["cpu_seconds"] / max(r["cpu_seconds"] + r["agent_cpu_seconds"], 1e-9)
print(f'| {len(r["nodes"])} | {slots} | {secs:.1f} | {slots/secs:.1f} | {r["claim_to_start_ms"]["p50"]:.0f} / {r["claim_to_start_ms"]["p99"]:.0f} | {r["duplicate_runs"]} ({100*r["duplicate_runs"]/slots:.1f} %) | {r["converge_seconds"]:.2f} | {r["cpu_seconds"]:.1f} | {r["agent_cpu_seconds"]:.1f} | {100*share:.0f} % | {len(roots) == 1} |')
print("per node: " + ", ".join(f'{n["lab"]} {n["runs"]} runs / {n["rescores"]} re-scores' for n in r["nodes"]))
PY
