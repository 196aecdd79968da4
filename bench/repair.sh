#!/usr/bin/env bash
# Pin repair benchmark (issue 46, point 4): the time to restore the pin factor after a lab
# holding N ledger objects leaves, beside a whole-DAG fetch of the same bytes between the same
# nodes in the same run — the fetch bench/transfer.sh's daemon row times (Node.PinFetch over
# /evalmesh/xfer/1.0.0), on the same bytes, so the ratio is repair's own cost — and the ratio
# against the >= 0.50 bound. Three real nodes on 127.0.0.1 (libp2p, the pack blockstore),
# pin factor 2: see bench/repair/main.go for what each row does.
#
# Usage: bench/repair.sh [-objects 100] [-size 1048576] [-runs 3] [-store pack] [-cpuprofile FILE]
#        bench/repair.sh -objects 400 -size 65536     # many small objects (submissions, logs)
#        bench/repair.sh -objects 4 -size 65536 -runs 1   # the tiny size make bench-smoke runs
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
WORK=${WORK:-/tmp/evalmesh-bench}
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/bench-repair" ./bench/repair
exec "$WORK/bin/bench-repair" -dir "$WORK/repair" "$@"
