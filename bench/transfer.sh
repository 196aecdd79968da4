#!/usr/bin/env bash
# Whole-bundle transfer benchmark (issue 5, point 3).
#
# Builds evalmesh and the Go driver (bench/transfer), then for each data set (a 1 GiB file; a
# bundle of 2,000 files of 4-64 KiB plus 4 x 100 MiB; generated once under $WORK/data) prints:
#   raw TCP                 the same bytes over one plain loopback TCP connection (the bound)
#   libp2p stream           the same bytes over one libp2p stream (TCP + TLS 1.3 + yamux, as the daemons), unverified: the bound
#   libp2p stream, noise    the same over noise (ChaCha20-Poly1305), the daemons' second choice; x libp2p stream is noise / TLS
#   sha256, write, floor    (with the daemons) what a verifying fetch must add to the stream:
#                           sha256 of every 256 KiB block (two a pass, as the receiver hashes them), a write of the same bytes into the
#                           homes' filesystem, into new pages and into pages freed a moment before (recycled), and the floor they set
#                           on this machine's cores (wall = max(stream, their CPU / cores)): with the recycled write (the least, which
#                           x floor divides by) and with the new-pages one (what the floor falls to when the VM must back new pages)
#   2 daemons               `evalmesh daemon` x2 on 127.0.0.1: task add on A, pin add on B
#                           (B fetches over /evalmesh/xfer/1.0.0, verifies, stores, pins), then a
#                           "fixed cost" line: pin add of a 1-block DAG, and the CLI's start alone
#   2 kubo daemons          only with KUBO=/path/to/ipfs (a kubo binary you built): ipfs add on A,
#                           ipfs pin add on B over bitswap, as a same-run reference
#   xfer, N peer(s)         node/xfer in-process between libp2p hosts, per blockstore
#   gateway CAR             boxo/gateway trustless CAR over go-libp2p HTTP, for comparison
# with MB/s (10^6 bytes of file content per second), CPU seconds (all processes involved) and
# the ratio to raw TCP measured in the same run. Each row is the fastest of RUNS runs.
#
# Usage: bench/transfer.sh [extra driver flags, e.g. -sets bundle -stores mem]
# Env: WORK (default /tmp/evalmesh-bench; needs ~4 GiB free), RUNS (default 3), KUBO,
# STORES (daemons' blockstore kinds, default pack; e.g. STORES=flat,pack measures both),
# HOMES (the daemons' homes, default $WORK/homes; e.g. HOMES=/dev/shm/evalmesh-homes puts them
# on tmpfs), PROFILE (a folder: each daemon writes pprof cpu.pprof and allocs.pprof there).
# The daemon rows also print each daemon's CPU s (send/recv), the receiving daemon's peak RSS
# (VmHWM) and, for pin add, the ratios to the libp2p stream row and to the floor row of the
# same run.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/evalmesh-bench}
RUNS=${RUNS:-3}
mkdir -p "$WORK/bin"
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
go build -o "$WORK/bin/evalmesh" ./cmd/evalmesh
go build -o "$WORK/bin/transfer" ./bench/transfer
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$WORK/bin/transfer" -dir "$WORK" ${HOMES:+-homes "$HOMES"} ${PROFILE:+-daemon-profile "$PROFILE"} -runs "$RUNS" -daemons "$WORK/bin/evalmesh" -daemon-stores "${STORES:-pack}" ${KUBO:+-kubo "$KUBO"} "$@"
