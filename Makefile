# The two commands of the README. CGO is needed by go-nvml (it loads the NVIDIA library at run
# time, so it builds without a GPU); the flag quiets its deprecation warnings.
export CGO_CFLAGS ?= -Wno-deprecated-declarations
GOTESTSUM := go run gotest.tools/gotestsum@v1.13.0

.PHONY: demo test build

# The main job on embedded defaults: example tasks x baseline agents, signed, verified, ranked.
demo:
	go run ./cmd/evalmesh demo

# Every test, under the race detector; ends with gotestsum's summary.
test:
	$(GOTESTSUM) --format pkgname-and-test-fails -- -race -count=1 -timeout 20m ./...

# The git revision is passed in as well: the go command stamps vcs.revision itself only in a
# plain checkout (not a git worktree) and not under GOFLAGS=-buildvcs=false.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED := $(shell git diff --quiet HEAD -- 2>/dev/null || echo true)
LDFLAGS := -X github.com/evalmesh/evalmesh/runner.buildRevision=$(REVISION) -X github.com/evalmesh/evalmesh/runner.buildModified=$(MODIFIED)

build:
	@go build -ldflags "$(LDFLAGS)" -o evalmesh ./cmd/evalmesh
