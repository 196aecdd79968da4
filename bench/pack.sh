#!/usr/bin/env bash
# Pack benchmark (issue 2): evalmesh's packer vs Go's crypto/sha256 over the same bytes,
# in one run. Shapes: a 1 GiB file; a folder of 2,000 x 4 KiB files + 4 x 100 MiB.
# Rows: sha256 (the floor: read + hash every 256 KiB piece), pack (root CID only, what
# `evalmesh task pack DIR` does), pack-car (every block streamed into a CARv1 file, fsynced).
# Usage: bench/pack.sh [-count N] [-pack.bigmib M ...]   (run from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
count=3
if [[ ${1:-} == -count ]]; then count=$2; shift 2; fi
out=$(go test ./tasks -run '^$' -bench '^BenchmarkPack$' -benchtime 1x -count "$count" -args "$@")
echo "$out" | grep -E '^(goos|goarch|cpu):' || true
echo "$out" | awk '
/^BenchmarkPack\// {
	split($1, p, "/"); shape = p[2]; kind = p[3]; sub(/-[0-9]+$/, "", kind)
	for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") v = $i
	# best of the runs: a shared machine only ever slows a run down
	if (v > best[shape, kind]) best[shape, kind] = v
}
END {
	printf "%-8s %12s %12s %12s %14s %14s\n", "shape", "sha256 MB/s", "pack MB/s", "car MB/s", "pack/sha256", "car/sha256"
	n = split("file folder", shapes, " ")
	for (i = 1; i <= n; i++) {
		s = shapes[i]; h = best[s, "sha256"]
		if (h == 0) continue
		printf "%-8s %12.0f %12.0f %12.0f %14.2f %14.2f\n", s, h, best[s, "pack"], best[s, "pack-car"], best[s, "pack"] / h, best[s, "pack-car"] / h
	}
}'
