#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU, self-contained: from the repository root it
#   1. builds evalmesh (cgo, for NVML) — or takes EVALMESH_BIN, a binary built elsewhere;
#   2. prints `evalmesh gpus --json` (exits 2 with the reason if NVML shows no GPU);
#   3. reads every GPU's total-energy counter twice, 2 s apart, and prints the delta (exits 3
#      if a counter cannot be read, goes backwards or does not advance: even an idle H200
#      draws tens of watts);
#   4. runs one example slot holding one GPU (process executor) and prints the attestation's
#      predicate: GPU model, hashed UUID, GPU-seconds, energy;
#   5. when a Docker engine with the NVIDIA runtime answers: one run of the ReAct example
#      agent beside the stand-in model (a test double) in a container given GPU 0 by UUID
#      (the agent gets GPU 1 where there is one), and prints the attested model part:
#      GPU count, GPU-seconds and energy of each container (exits 5 when the model's energy
#      is not above 0). Without Docker the step is skipped (SKIP line), not failed.
# Every step has its own time bound; the whole script takes well under 3 minutes once Go's
# module cache is warm (a cold build downloads modules: no network, no build — build on a
# machine that has both and pass EVALMESH_BIN=/path/to/evalmesh).
#
#   bench/gpu-check.sh                      # OUT=$(mktemp -d) keeps the binary, home, JSON
#   EVALMESH_BIN=./em OUT=/tmp/gc bench/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=-Wno-deprecated-declarations
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
fail() { code=$1; shift; echo "FAIL: $*" >&2; exit "$code"; }
t0=$(date +%s)

echo "== build"
if [ -n "${EVALMESH_BIN:-}" ]; then
  [ -x "$EVALMESH_BIN" ] || fail 1 "EVALMESH_BIN=$EVALMESH_BIN is not an executable file"
  cp "$EVALMESH_BIN" "$OUT/evalmesh"
  echo "using $EVALMESH_BIN"
else
  command -v go >/dev/null || fail 1 "no go on PATH: install Go (go.mod names the version) or pass EVALMESH_BIN=/path/to/evalmesh"
  command -v gcc >/dev/null || command -v cc >/dev/null || fail 1 "no C compiler: NVML needs cgo (apt-get install gcc) or pass EVALMESH_BIN"
  if ! CGO_ENABLED=1 timeout 150 go build -o "$OUT/evalmesh" ./cmd/evalmesh >"$OUT/build.log" 2>&1; then
    tail -20 "$OUT/build.log" >&2
    fail 1 "go build failed (log: $OUT/build.log); without network or module cache, build elsewhere and pass EVALMESH_BIN"
  fi
  echo "ok: $OUT/evalmesh ($(( $(date +%s) - t0 )) s)"
fi
EM="$OUT/evalmesh"

echo "== nvidia-smi"
if command -v nvidia-smi >/dev/null; then
  timeout 20 nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,power.draw --format=csv || echo "(nvidia-smi failed)"
else
  echo "(no nvidia-smi on PATH)"
fi

echo "== evalmesh gpus --json"
timeout 30 "$EM" gpus --json | tee "$OUT/gpus.json"
if grep -q '"cpu_only": true' "$OUT/gpus.json"; then
  reason=$(sed -n 's/.*"reason": "\(.*\)".*/\1/p' "$OUT/gpus.json")
  fail 2 "no GPU: NVML reports none (${reason:-no reason given}). Is this a machine with an NVIDIA GPU and its driver loaded (nvidia-smi)?"
fi

echo "== energy counter, read twice 2 s apart"
timeout 30 "$EM" gpus --json --energy-sample 2s >"$OUT/energy.json" || fail 3 "reading the energy counters failed"
cat "$OUT/energy.json"
# One line per GPU: uuid first second delta watts error (the JSON is printed indented).
awk -F': ' '
  /"uuid"/         { gsub(/[",]/, "", $2); u = $2 }
  /"first_mj"/     { gsub(/,/, "", $2); f = $2 }
  /"second_mj"/    { gsub(/,/, "", $2); s = $2 }
  /"delta_joules"/ { gsub(/,/, "", $2); d = $2 }
  /"mean_watts"/   { gsub(/,/, "", $2); w = $2 }
  /"error"/        { gsub(/[",]/, "", $2); e = $2 }
  /^  }/           { printf "%s %s %s %s %s %s\n", u, f, s, d, w, (e == "" ? "-" : e); u = f = s = d = w = e = "" }
' "$OUT/energy.json" >"$OUT/energy.txt"
[ -s "$OUT/energy.txt" ] || fail 3 "no energy reading in $OUT/energy.json"
bad=0
while read -r uuid first second delta watts err; do
  if [ "$err" != "-" ]; then
    echo "$uuid: energy counter unreadable: $err"; bad=1
  elif [ "$second" -lt "$first" ] || [ "$second" -eq "$first" ]; then
    echo "$uuid: energy counter did not advance ($first mJ -> $second mJ)"; bad=1
  else
    echo "$uuid: energy delta $delta J over 2 s ($first mJ -> $second mJ, $watts W)"
  fi
done <"$OUT/energy.txt"
[ "$bad" -eq 0 ] || fail 3 "energy counter check failed (see above)"

echo "== one run holding a GPU (process executor)"
H="$OUT/home"
"$EM" init --home "$H" >/dev/null
timeout 60 "$EM" demo --home "$H" --seeds 1 --agents solver --tasks arithmetic >/dev/null 2>&1 ||
  fail 4 "evalmesh demo failed: rerun $EM demo --home $H --seeds 1 --agents solver --tasks arithmetic"
T="$OUT/arith-gpu"
rm -rf "$T"
cp -r "$H/examples/tasks/arithmetic" "$T"
sed -i 's/^  gpus: 0$/  gpus: 1/' "$T/task.yaml"
grep -q '^  gpus: 1$' "$T/task.yaml" || fail 4 "could not make the example task ask for a GPU"
timeout 60 "$EM" run --home "$H" --task "$T" --agent examples/agents/specs/solver.yaml --executor process --json | tee "$OUT/run.json"
ID=$(sed -n 's/.*"attestation_id": "\(.*\)".*/\1/p' "$OUT/run.json")
[ -n "$ID" ] || fail 4 "the run printed no attestation ID"
echo "== attestation $ID (statement)"
sed -n 's/.*"payload": *"\([^"]*\)".*/\1/p' "$H/attestations/$ID.json" | base64 -d
echo

echo "== a run with a model container (docker)"
if ! command -v docker >/dev/null || ! timeout 10 docker info >/dev/null 2>&1; then
  echo "SKIP: no Docker engine answers (the model-container check needs docker and the NVIDIA container runtime)"
else
  P="$OUT/pod"; mkdir -p "$P"
  CGO_ENABLED=0 timeout 120 go build -o "$P/agent" ./examples/agents/cmd/react || fail 5 "go build react"
  CGO_ENABLED=0 timeout 120 go build -o "$P/model" ./examples/agents/cmd/standin-model || fail 5 "go build standin-model"
  printf 'FROM scratch\nCOPY agent /agent\nCOPY model /model\n' >"$P/Dockerfile"
  DOCKER_BUILDKIT=0 timeout 120 docker build -q -t evalmesh-gpu-check-pod "$P" >/dev/null || fail 5 "docker build of the pod image"
  IMG=$(docker inspect --format '{{.Id}}' evalmesh-gpu-check-pod)
  NG=$(grep -c '"uuid"' "$OUT/gpus.json" || true)
  TG=1; [ "${NG:-1}" -ge 2 ] && TG=2
  sed -i "s/^    images: \[\]$/    images: [\"$IMG\"]/" "$H/config.yaml"
  grep -q "$IMG" "$H/config.yaml" || fail 5 "could not list the model image in $H/config.yaml (runner.models.images)"
  sed -i "s/^  gpus: 1$/  gpus: $TG/" "$T/task.yaml"
  cat >"$P/agent.yaml" <<SPEC
name: react-gpu-check
version: "1"
image: $IMG
command: ["/agent"]
model:
  name: standin
  image: $IMG
  command: ["/model", "serve", "--addr", "127.0.0.1:8000", "--model", "standin"]
  gpus: 1
  port: 8000
  ready_path: /health
  probe: ["/model", "probe"]
  ready_timeout_seconds: 60
SPEC
  timeout 180 "$EM" run --home "$H" --task "$T" --agent "$P/agent.yaml" --executor docker --json | tee "$OUT/pod-run.json" ||
    fail 5 "the model-container run failed (is the NVIDIA container runtime installed? docker run --gpus all needs it)"
  PID=$(sed -n 's/.*"attestation_id": "\(.*\)".*/\1/p' "$OUT/pod-run.json")
  [ -n "$PID" ] || fail 5 "the model-container run printed no attestation ID"
  sed -n 's/.*"payload": *"\([^"]*\)".*/\1/p' "$H/attestations/$PID.json" | base64 -d >"$OUT/pod-statement.json"
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["predicate"]["model"]; print(json.dumps(m, indent=1)); sys.exit(0 if m["gpu_count"]==1 and m["energy_joules"]>0 else 5)' "$OUT/pod-statement.json" ||
    fail 5 "the attested model part lacks its GPU or its energy (see $OUT/pod-statement.json)"
fi
echo "== done in $(( $(date +%s) - t0 )) s; files in $OUT"
