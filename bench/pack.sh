#!/usr/bin/env bash
# Pack benchmark (issue 2): evalmesh's packer vs Go's crypto/sha256 over the same bytes,
# in one run. Shapes: a 1 GiB file; a folder of 2,000 x 4 KiB files + 4 x 100 MiB.
# Rows: sha256 (the floor: read + hash every 256 KiB piece), pack (root CID only, what
# `evalmesh task pack DIR` does), pack-car (every block streamed into a CARv1 file, fsynced).
# Then the unpack of the folder from a CAR (`evalmesh task unpack`: every block re-hashed and
# written into a new folder) beside sha256 of the same bytes.
# Tables: wall-clock MB/s, MB per CPU-second of the process (robust when the machine is
# shared), each the best of -count runs; then each row's peak RSS in MiB, the largest of the
# runs (VmHWM of the benchmark process, reset before each row: testutil.ReportPeakRSS).
# Usage: bench/pack.sh [-count N] [-pack.bigmib M ...]   (run from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
count=3
if [[ ${1:-} == -count ]]; then count=$2; shift 2; fi
out=$(go test ./tasks -run '^$' -bench '^Benchmark(Pack|Unpack)$' -benchtime 1x -count "$count" -args "$@")
echo "$out" | grep -E '^(goos|goarch|cpu):' || true
echo "$out" | awk '
/^BenchmarkPack\// {
	split($1, p, "/"); shape = p[2]; kind = p[3]; sub(/-[0-9]+$/, "", kind)
	for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s") v = $i; if ($(i+1) == "cpuMB/s") c = $i; if ($(i+1) == "peak-MiB") r = $i }
	# best of the runs: a shared machine only ever slows a run down; memory: the worst
	if (v > best[shape, kind]) best[shape, kind] = v
	if (c > cbest[shape, kind]) cbest[shape, kind] = c
	if (r > rss[shape, kind]) rss[shape, kind] = r
}
/^BenchmarkUnpack\// {
	split($1, p, "/"); kind = p[3]; sub(/-[0-9]+$/, "", kind)
	for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s") v = $i; if ($(i+1) == "cpuMB/s") c = $i; if ($(i+1) == "peak-MiB") r = $i }
	if (v > ubest[kind]) ubest[kind] = v
	if (c > ucbest[kind]) ucbest[kind] = c
	if (r > rss["folder", "un" kind]) rss["folder", "un" kind] = r
}
END {
	n = split("file folder", shapes, " ")
	for (m = 1; m <= 2; m++) {
		unit = (m == 1) ? "MB/s (wall)" : "MB/CPU-s"
		printf "\n%-8s %-12s %10s %10s %10s %12s %12s\n", "shape", "unit", "sha256", "pack", "pack-car", "pack/sha256", "car/sha256"
		for (i = 1; i <= n; i++) {
			s = shapes[i]
			if (m == 1) { h = best[s, "sha256"]; pk = best[s, "pack"]; q = best[s, "pack-car"] } else { h = cbest[s, "sha256"]; pk = cbest[s, "pack"]; q = cbest[s, "pack-car"] }
			if (h == 0) continue
			printf "%-8s %-12s %10.0f %10.0f %10.0f %12.2f %12.2f\n", s, unit, h, pk, q, pk / h, q / h
		}
	}
	if (ubest["sha256"] > 0) {
		printf "\n%-8s %-12s %10s %10s %14s\n", "shape", "unit", "sha256", "unpack", "unpack/sha256"
		printf "%-8s %-12s %10.0f %10.0f %14.2f\n", "folder", "MB/s (wall)", ubest["sha256"], ubest["unpack"], ubest["unpack"] / ubest["sha256"]
		printf "%-8s %-12s %10.0f %10.0f %14.2f\n", "folder", "MB/CPU-s", ucbest["sha256"], ucbest["unpack"], ucbest["unpack"] / ucbest["sha256"]
	}
	printf "\n%-8s %-12s %10s %10s %10s %10s\n", "shape", "unit", "sha256", "pack", "pack-car", "unpack"
	for (i = 1; i <= n; i++) {
		s = shapes[i]
		if (rss[s, "pack"] == 0) continue
		u = (rss[s, "ununpack"] > 0) ? sprintf("%10.0f", rss[s, "ununpack"]) : sprintf("%10s", "-")
		printf "%-8s %-12s %10.0f %10.0f %10.0f %s\n", s, "peak RSS MiB", rss[s, "sha256"], rss[s, "pack"], rss[s, "pack-car"], u
	}
}'
