#!/usr/bin/env bash
# Cross-architecture determinism of the ledger (docs/design.md §7: honest nodes MUST produce
# byte-identical ledgers). Go may fuse x*y+z into one FMA on arm64, ppc64le, s390x,
# riscv64 and loong64 (never on amd64), and package math's Exp/Log are assembly on some
# architectures; package scoring avoids both (scoring/detmath.go). This script proves it:
#
#  1. no fused multiply-add instruction in package scoring's code for any of those
#     architectures (compiler output, go build -gcflags=-S);
#  2. the scoring tests — among them TestLedgerGoldenRoot (two ledger roots of a fixed
#     8,700-result input with ties at the 1e-6 threshold, invalid runs, huge worst values,
#     a never-losing agent) and TestRawNumericGolden (the exact bits of every numeric
#     stage before rounding) against goldens in scoring/testdata — natively and, cross-
#     compiled, under qemu-user for each architecture whose emulator is installed;
#  3. prints the roots per architecture.
#
# Needs qemu-user-static (Debian: apt-get install -y qemu-user-static) for step 2 on
# foreign architectures; without it those are reported as skipped. Not part of make test.
# Usage: bench/crossarch.sh [--fma-only] [arch ...]   (default: arm64 ppc64le s390x; also
# tried: riscv64, arm and 386, which pass too). --fma-only runs step 1 alone (make check runs
# it); `bench/crossarch.sh amd64` on an amd64 machine runs step 1 and the native tests.
set -euo pipefail
cd "$(dirname "$0")/.."
fma_only=0
if [[ ${1:-} == --fma-only ]]; then fma_only=1; shift; fi
archs=("$@")
[[ ${#archs[@]} -gt 0 ]] || archs=(arm64 ppc64le s390x)
export CGO_ENABLED=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

echo "== fused multiply-add instructions in package scoring (want 0)"
fmaarchs=(arm64 ppc64le s390x riscv64 loong64)
for a in "${archs[@]}"; do [[ " ${fmaarchs[*]} " == *" $a "* ]] || fmaarchs+=("$a"); done
for a in "${fmaarchs[@]}"; do
	# WFMAXDB/WFMINDB (s390x's max and min) share WFMA's prefix and fuse nothing.
	n=$(GOARCH=$a go build -gcflags='github.com/evalmesh/evalmesh/scoring=-S' -o /dev/null ./scoring 2>&1 |
		grep -viE '[[:space:]]WFM(AX|IN)[A-Z0-9]*[[:space:]]' |
		grep -ciE '[[:space:]](FMADD|FMSUB|FNMADD|FNMSUB|WFMA|WFMS|VFMADD|VFMSUB|VFNMADD|VFNMSUB)[A-Z0-9]*[[:space:]]' || true)
	printf '%-8s %s\n' "$a" "$n"
	[[ $n == 0 ]] || fail=1
done

if [[ $fma_only == 1 ]]; then
	if [[ $fail == 0 ]]; then echo "crossarch --fma-only: OK"; else echo "crossarch --fma-only: FAILED (a fused multiply-add in package scoring: see scoring/detmath.go)"; exit 1; fi
	exit 0
fi

tests='GoldenRoot|RawNumeric|TieBoundary|DetMath|Cholesky|Ledger|Elo|Newton|Fit|Tie|Normalized|Binomial|Quantile'
run() { # arch
	local a=$1 out rc=0 q
	if [[ $a == "$(go env GOHOSTARCH)" ]]; then
		out=$(cd scoring && go test -count=1 -v -run "$tests" . 2>&1) || rc=$?
	else
		q=qemu-$a-static
		[[ $a == arm64 ]] && q=qemu-aarch64-static
		if [[ $a == 386 && $(go env GOHOSTARCH) == amd64 ]]; then
			q=env # an amd64 kernel runs 386 binaries itself (qemu-i386 crashes Go's runtime)
		fi
		command -v "$q" >/dev/null || q=${q%-static}
		if ! command -v "$q" >/dev/null; then
			printf '%-8s skipped (%s not installed: apt-get install -y qemu-user-static)\n' "$a" "$q"
			return
		fi
		GOARCH=$a go test -c -o "$tmp/scoring.$a" ./scoring
		out=$(cd scoring && "$q" "$tmp/scoring.$a" -test.count=1 -test.v -test.run "$tests" 2>&1) || rc=$?
	fi
	echo "$out" | awk -v a="$a" '/^(population|estimated) [0-9a-f]+$/ && !seen[$0]++ {printf "%-8s %-10s %s\n", a, $1, $2}'
	if [[ $rc == 0 ]]; then
		printf '%-8s tests PASS (%d)\n' "$a" "$(echo "$out" | grep -c -- '--- PASS')"
	else
		printf '%-8s tests FAIL:\n' "$a"
		echo "$out" | grep -E -- '--- FAIL|_test.go:[0-9]+:' | head -20
		fail=1
	fi
}

echo "== ledger roots of the golden input (want: the same on every line pair) and tests"
echo "golden   $(tr '\n' ' ' < scoring/testdata/golden_root.txt)"
run "$(go env GOHOSTARCH)"
for a in "${archs[@]}"; do
	[[ $a == "$(go env GOHOSTARCH)" ]] || run "$a"
done
if [[ $fail == 0 ]]; then echo "crossarch: OK"; else echo "crossarch: FAILED"; exit 1; fi
