#!/usr/bin/env bash
# Anti-entropy benchmark (issue 10): two evalmesh nodes on 127.0.0.1 (real libp2p hosts,
# pebble stores), every envelope verified before it is stored. Prints a markdown table:
#   late joiner        N real signed run attestations to an empty node
#   in sync            M IDs on each side, already equal: one session over the real stream
#                      (the stores filled with stand-in records, FillUnverified; build tag
#                      evalmesh_benchfill, this script's build only)
#   healed partition   K new on each side of N shared, timed from the dial (automatic sync)
#                      to equal sets
# with wall time, round trips, bytes, verification share and the go-ds-crdt anchor.
#
# Usage: bench/sync.sh [-n 100000] [-ids 1000000] [-new 1000] [-cache DIR]
#        bench/sync.sh -n 2000 -ids 10000 -new 50      # the tiny size CI runs
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
WORK=${WORK:-/tmp/evalmesh-bench}
mkdir -p "$WORK/bin"
go build -tags evalmesh_benchfill -o "$WORK/bin/bench-sync" ./bench/sync
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$WORK/bin/bench-sync" "$@"
