# The commands of the README. CGO is needed by go-nvml (it loads the NVIDIA library at run
# time, so it builds without a GPU); the flag quiets its deprecation warnings.
export CGO_CFLAGS ?= -Wno-deprecated-declarations
GOTESTSUM := go run gotest.tools/gotestsum@v1.13.0
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: demo test check bench-smoke build install

# The main job on embedded defaults: example tasks x baseline agents, signed, verified, ranked.
demo:
	go run ./cmd/evalmesh demo

# Every check, then every bench/ script once on tiny inputs, then every test under the race
# detector; ends with gotestsum's summary (CI reads the closing lines). -timeout is per
# package: cmd/evalmesh's real-daemon tests include, in CI, the hosts harness's 5-minute
# partition (TestHostsFaults alone took 12.6 min under -race on a loaded 2-core machine; this
# session added about 5 min of new real-daemon tests to the package).
test: check bench-smoke
	$(GOTESTSUM) --format pkgname-and-test-fails -- -race -count=1 -timeout 45m ./...

# Static checks: gofmt (fails on any unformatted file), go vet, staticcheck (staticcheck.conf),
# no fused multiply-add in package scoring on any architecture (ledgers must be bit-equal),
# docs/design.md's package diagram matching the imports, no import the design forbids
# (docs/imports-deny.txt), and no direct wall-clock call in node, protocol or attest (a
# context's timeout or deadline included) that is not marked `// wall clock: WHY`
# (docs/wallclock.go; time that decides comes from the injected clock, docs/design.md §6).
check:
	@echo "== gofmt"; out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt: these files are not formatted (run gofmt -w on them):"; echo "$$out"; exit 1; fi
	@echo "== go vet"; go vet ./...
	@echo "== staticcheck"; $(STATICCHECK) ./...
	@bench/crossarch.sh --fma-only
	@echo "== package diagram"; docs/imports.sh --check
	@echo "== import rules"; docs/imports-deny.sh
	@echo "== wall clock"; go run docs/wallclock.go node protocol attest

# Each bench/ script once on tiny inputs, so none rots; the figures mean nothing at this size.
BENCH_WORK := $(or $(TMPDIR),/tmp)/evalmesh-bench-smoke
bench-smoke:
	@echo "== bench smoke: pack"; bench/pack.sh -count 1 -pack.bigmib 2 -pack.largemib 1 -pack.small 20 >/dev/null
	@echo "== bench smoke: score"; bench/score.sh -count 1 -score.maxresults 4000 >/dev/null
	@echo "== bench smoke: transfer"; rm -rf $(BENCH_WORK); WORK=$(BENCH_WORK) RUNS=1 bench/transfer.sh -sets tiny -peers 1 -stores mem >/dev/null 2>$(BENCH_WORK).log || { cat $(BENCH_WORK).log; exit 1; }; rm -rf $(BENCH_WORK) $(BENCH_WORK).log
	@echo "== bench smoke: verify"; go run ./bench/verify -n 200 -cores 1 -batch 64 -rounds 1 >/dev/null
	@echo "== bench smoke: start"; go test -run '^$$' -bench . -benchtime 1x ./bench/start/ >/dev/null
	@echo "== bench smoke: crossarch (native)"; bench/crossarch.sh $$(go env GOHOSTARCH) >/dev/null
	@echo "== bench smoke: sim"; bench/sim.sh -seeds 1 >/dev/null
	@echo "== bench smoke: sim-takeover"; bench/sim-takeover.sh -seeds 1 -slots 200 >/dev/null
	@echo "== bench smoke: repair"; WORK=$(BENCH_WORK)-repair bench/repair.sh -objects 4 -size 65536 -runs 1 >/dev/null; rm -rf $(BENCH_WORK)-repair
	@echo "== bench smoke: sync"; bench/sync.sh -n 200 -ids 2000 -new 20 -cache $(BENCH_WORK)-sync >/dev/null; rm -rf $(BENCH_WORK)-sync
	@echo "== bench smoke: ledger-scale"; bench/ledger-scale.sh -rounds 1 -solvers cg 20 >/dev/null
	@echo "== bench smoke: campaign"; bench/campaign.sh -seeds 1 >/dev/null
	@echo "== bench smoke: shape (skipped outside a git checkout)"; if git rev-parse -q --verify HEAD >/dev/null 2>&1; then bench/shape.sh HEAD >/dev/null; fi
	@echo "== bench smoke: dashboard pages"; go test -run '^$$' -bench Page -benchtime 1x ./node/dashboard/ >/dev/null
	@echo "== bench smoke: agentimage (skipped without a Docker engine)"; if docker info >/dev/null 2>&1; then SIZE_MIB=1 RUNS=1 WORK=$(BENCH_WORK)-agentimage bench/agentimage.sh >/dev/null; fi
	@echo "== bench smoke: gpu-check (exit 2 means no GPU here, as expected without one)"; rc=0; OUT=$(BENCH_WORK)-gpu bench/gpu-check.sh >/dev/null 2>&1 || rc=$$?; rm -rf $(BENCH_WORK)-gpu; [ $$rc = 0 ] || [ $$rc = 2 ] || { echo "bench/gpu-check.sh failed with exit $$rc"; exit 1; }

# The git revision is passed in as well: the go command stamps vcs.revision itself only in a
# plain checkout (not a git worktree) and not under GOFLAGS=-buildvcs=false.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED := $(shell git diff --quiet HEAD -- 2>/dev/null || echo true)
LDFLAGS := -X github.com/evalmesh/evalmesh/runner.buildRevision=$(REVISION) -X github.com/evalmesh/evalmesh/runner.buildModified=$(MODIFIED)

# The evalmesh binary in the current folder (`evalmesh version` names its git revision), and
# beside it the static recording proxy its runner puts between agents and their models
# (docs/agents.md "Transcripts").
build:
	@go build -ldflags "$(LDFLAGS)" -o evalmesh ./cmd/evalmesh
	@CGO_ENABLED=0 go build -o evalmesh-model-proxy ./cmd/evalmesh-model-proxy

# evalmesh into $(go env GOPATH)/bin (or GOBIN), quietly: the same build as `build`.
install:
	@go install -ldflags "$(LDFLAGS)" ./cmd/evalmesh
	@CGO_ENABLED=0 go install ./cmd/evalmesh-model-proxy
