#!/usr/bin/env bash
# Agent image over IPFS vs plain docker (issue 15, point 2).
#
# Builds a FROM scratch image holding one file of SIZE_MIB MiB of random bytes, then times,
# on the local Docker engine (each row the fastest of RUNS runs; the image is removed before
# every load, so each load really loads):
#   docker save + load   docker save ID -o FILE; docker load -i FILE (the bound)
#   evalmesh             evalmesh agent add on daemon A (save by ID, add as UnixFS, pin),
#                        then evalmesh agent pull on daemon B (fetch from A over
#                        /evalmesh/xfer/1.0.0, every block checked, pin; tar checked; load)
# and prints wall seconds, MB/s of tar and the ratio to the bound measured in the same run.
# Both daemons use this one engine: what differs from two machines is only that the save
# and the load share its disk and CPUs. Everything it made is removed at the end.
#
# Usage: bench/agentimage.sh      Env: SIZE_MIB (default 1024), RUNS (default 2),
# WORK (default /tmp/evalmesh-bench-agentimage; needs ~4 x SIZE_MIB free).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-1024}
RUNS=${RUNS:-2}
WORK=${WORK:-/tmp/evalmesh-bench-agentimage}
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
command -v docker >/dev/null || { echo "bench/agentimage.sh: needs the docker CLI and an engine" >&2; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK/ctx" "$WORK/bin"
pids=()
image=""
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -n "$image" ] && docker rmi -f "$image" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
go build -o "$WORK/bin/evalmesh" ./cmd/evalmesh
em="$WORK/bin/evalmesh"

head -c "$((SIZE_MIB << 20))" /dev/urandom >"$WORK/ctx/big"
printf 'FROM scratch\nCOPY big /big\n' >"$WORK/ctx/Dockerfile"
tag="evalmesh-bench-agentimage:$$"
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$WORK/ctx" >/dev/null 2>&1
image=$(docker inspect --format '{{.Id}}' "$tag")
rm -f "$WORK/ctx/big"

for h in A B; do
	"$em" init --home "$WORK/$h" >/dev/null
	sed -i 's#/tcp/[0-9]*$#/tcp/0#; s#/udp/[0-9]*/quic-v1#/udp/0/quic-v1#' "$WORK/$h/config.yaml"
	"$em" daemon --home "$WORK/$h" >"$WORK/$h.log" 2>&1 &
	pids+=($!)
done
for h in A B; do
	for _ in $(seq 100); do [ -s "$WORK/$h/api" ] && "$em" id --home "$WORK/$h" >/dev/null 2>&1 && break; sleep 0.2; done
done
addr=$("$em" id --home "$WORK/A" --json | grep -m1 -o '"/ip4/[^"]*/tcp/[^"]*"' | tr -d '"')
"$em" connect --home "$WORK/B" "$addr" >/dev/null

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
lt() { awk "BEGIN { exit !($1 < $2) }"; }
best_base="" best_em="" tar_bytes=0
for run in $(seq "$RUNS"); do
	t0=$(now)
	docker save "$image" -o "$WORK/base.tar"
	docker rmi "$image" >/dev/null
	docker load -q -i "$WORK/base.tar" >/dev/null
	t1=$(now)
	tar_bytes=$(stat -c %s "$WORK/base.tar")
	rm -f "$WORK/base.tar"
	base=$(calc "$t1 - $t0")

	printf 'name: bench\nversion: "%s"\nimage: %s\ncommand: ["/big"]\n' "$run" "$image" >"$WORK/spec.yaml"
	t0=$(now)
	"$em" agent add --home "$WORK/A" "$WORK/spec.yaml" >/dev/null
	t1=$(now)
	docker rmi "$image" >/dev/null # B's engine lacks it (untimed)
	t2=$(now)
	"$em" agent pull --home "$WORK/B" "$WORK/spec.yaml" >/dev/null
	t3=$(now)
	docker image inspect "$image" >/dev/null
	emt=$(calc "($t1 - $t0) + ($t3 - $t2)")
	echo "run $run: docker ${base}s; evalmesh ${emt}s (add $(calc "$t1 - $t0")s, pull $(calc "$t3 - $t2")s)" >&2
	# Unpin on both so the next run adds and fetches afresh.
	cid=$(sed -n 's/^image_cid: *//p' "$WORK/spec.yaml")
	"$em" pin rm --home "$WORK/A" "$cid" >/dev/null
	"$em" pin rm --home "$WORK/B" "$cid" >/dev/null
	"$em" repo gc --home "$WORK/A" >/dev/null
	"$em" repo gc --home "$WORK/B" >/dev/null
	if [ -z "$best_base" ] || lt "$base" "$best_base"; then best_base=$base; fi
	if [ -z "$best_em" ] || lt "$emt" "$best_em"; then best_em=$emt; fi
done

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); image $SIZE_MIB MiB of random bytes, tar $tar_bytes bytes; best of $RUNS"
printf '%-22s %10s %10s %8s\n' path seconds MB/s ratio
printf '%-22s %10.2f %10.1f %8.2f\n' "docker save + load" "$best_base" "$(calc "$tar_bytes / $best_base / 1000000")" 1
printf '%-22s %10.2f %10.1f %8.2f\n' "evalmesh add + pull" "$best_em" "$(calc "$tar_bytes / $best_em / 1000000")" "$(calc "$best_em / $best_base")"
