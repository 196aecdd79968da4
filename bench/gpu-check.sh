#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU: build evalmesh (cgo, for NVML), print the GPU
# inventory as JSON, read every GPU's total-energy counter twice (with a short CUDA-free load
# in between: the counter must not go backwards, and it advances even at idle), and run one
# example slot on the process executor with a GPU-requiring copy of a task so the attestation
# carries the GPU model, hashed UUID and energy. Prints one section per step; exits non-zero
# on the first failure. Set EVALMESH_BIN to a prebuilt binary where Go is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=-Wno-deprecated-declarations
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "== build"
if [ -n "${EVALMESH_BIN:-}" ]; then
  # A binary built elsewhere (with cgo, e.g. `go build -o evalmesh ./cmd/evalmesh`), for a
  # machine without Go.
  cp "$EVALMESH_BIN" "$OUT/evalmesh"
  echo "using $EVALMESH_BIN"
else
  go build -o "$OUT/evalmesh" ./cmd/evalmesh 2>"$OUT/build.log" || { tail -20 "$OUT/build.log"; exit 1; }
  echo "ok: $OUT/evalmesh"
fi
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,power.draw --format=csv || true
echo "== evalmesh gpus --json"
"$OUT/evalmesh" gpus --json | tee "$OUT/gpus.json"
echo "== energy counter, read twice 2 s apart"
"$OUT/evalmesh" gpus --json --energy-sample 2s | tee "$OUT/energy.json"
echo "== one run holding a GPU (process executor)"
H="$OUT/home"
"$OUT/evalmesh" init --home "$H" >/dev/null
"$OUT/evalmesh" demo --home "$H" --seeds 1 --agents solver --tasks arithmetic >/dev/null 2>&1
T="$OUT/arith-gpu"
cp -r "$H/examples/tasks/arithmetic" "$T"
sed -i 's/^  gpus: 0$/  gpus: 1/' "$T/task.yaml"
"$OUT/evalmesh" run --home "$H" --task "$T" --agent examples/agents/specs/solver.yaml --executor process --json | tee "$OUT/run.json"
ID=$(sed -n 's/.*"attestation_id": "\(.*\)".*/\1/p' "$OUT/run.json")
python3 - "$H/attestations/$ID.json" <<'PY'
import base64, json, sys
env = json.load(open(sys.argv[1]))
p = json.loads(base64.b64decode(env["payload"]))["predicate"]
print(json.dumps({k: p[k] for k in ("hardware", "wall_seconds", "gpu_seconds", "energy_joules", "telemetry", "valid", "score")}, indent=2))
PY
echo "== done"
