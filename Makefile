# locktop: the two commands a new user runs are `make demo` and `make test`.
# Both install what they need (the PostgreSQL server, redis-server, tmux, promtool, chromium and libfaketime) when missing.

GO       ?= go
BIN      := bin/locktop
GOFLAGS  ?=
export GOFLAGS

# staticcheck runs in `make test`; this version (2026.2.2) is installed into GOPATH/bin when missing.
STATICCHECK_VERSION := 0.8.2
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: demo test gotest racebuild gotest-cli gotest-rest build deps vet staticcheck fmt-check bench clean

## demo: build and open the dashboard on a throw-away PostgreSQL and Redis with the simulator
demo: deps build
	./$(BIN)

## test: vet, staticcheck, formatting, and every test (real PostgreSQL, Redis and SQLite) with -race
# The checks run beside the tests (make -j): the end-to-end tests spend
# much of their time waiting on a terminal or a server, and CI's caches
# start cold, so vet's and staticcheck's builds fill that time. Each
# target's output is printed whole when it ends (--output-sync).
test: deps
	@$(MAKE) --no-print-directory -j5 --output-sync=target fmt-check vet staticcheck gotest-cli gotest-rest

# The end-to-end tests of internal/cli take the longest (about four
# minutes, mostly waiting on a terminal or a server): they run as a go test
# of their own, started at once, beside the other packages two at a time.
# LOCKTOP_PG_TEMPLATE: every throw-away cluster, the tests' and the locktop
# binaries' they run, copies one initdb'd template (pgcluster.Options.Template).
# racebuild compiles the packages once for both (cold caches would
# otherwise compile each twice, side by side). -vet=off: the vet target
# runs every vet check over the same packages already, so go test's own
# subset of them would only repeat it.
CLI_PKG := ./internal/cli
# TESTTMP: the tests' temporary files (t.TempDir, the throw-away clusters,
# the SQLite files, the histories and recordings) go to /dev/shm when it is
# a tmpfs with 4 GiB free. Their fsyncs are what those tests wait on, and on
# a busy disk each one can take tens of milliseconds: the history,
# recording and lease packages ran 2-3x faster there, same tests, same
# syncs. A small /dev/shm (Docker's 64 MiB) keeps the default. The
# end-to-end tests of internal/cli keep it too: they check the embedded
# cluster's socket path, /tmp/locktop-pg-…, whole in an 80-column header.
TESTTMP := $(shell df -k --output=fstype,avail /dev/shm 2>/dev/null | awk 'NR==2 && $$1=="tmpfs" && $$2>=4194304 {print "/dev/shm"}')
gotest-rest: export TMPDIR := $(or $(TESTTMP),$(TMPDIR),/tmp)
gotest: gotest-cli gotest-rest
racebuild:
	$(GO) build -race ./...
gotest-cli: racebuild
	LOCKTOP_PG_TEMPLATE=1 $(GO) test -race -vet=off -count=1 -timeout 20m $(CLI_PKG)
gotest-rest: racebuild
	LOCKTOP_PG_TEMPLATE=1 $(GO) test -race -vet=off -count=1 -p 2 -timeout 20m $$($(GO) list ./... | grep -v '/internal/cli$$')

# VERSION names the build in `locktop --version`: the commit, as git describes it.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

build:
	$(GO) build -ldflags "-X github.com/locktop/locktop/internal/cli.version=$(VERSION)" -o $(BIN) .

# vet type-checks against the -race build racebuild leaves in the cache:
# a plain `go vet` would compile every package and dependency a second
# time without -race (about 580 CPU-seconds on a cold cache, against 120).
# No file of ours is built only with or without the race tag.
vet: racebuild
	$(GO) vet -race ./...

staticcheck:
	@if ! [ -x "$(STATICCHECK)" ] || ! "$(STATICCHECK)" -version 2>/dev/null | grep -q "$(STATICCHECK_VERSION)"; then \
		echo "installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@v$(STATICCHECK_VERSION); \
	fi
	"$(STATICCHECK)" ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## deps: install the PostgreSQL server, redis-server, tmux, promtool (Debian's prometheus, to check deploy/), chromium (the HTML report's browser tests) and libfaketime (moves a throw-away server's clock) with apt-get if they are missing
deps:
	@missing=""; \
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then missing="$$missing postgresql"; fi; \
	if ! command -v pgbench >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then missing="$$missing postgresql-client"; fi; \
	if ! command -v tmux >/dev/null 2>&1; then missing="$$missing tmux"; fi; \
	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then missing="$$missing redis-server"; fi; \
	if ! command -v promtool >/dev/null 2>&1; then missing="$$missing prometheus"; fi; \
	if ! command -v chromium >/dev/null 2>&1; then missing="$$missing chromium"; fi; \
	if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then missing="$$missing libfaketime"; fi; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; \
		elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; \
		else echo "locktop needs:$$missing; install them with: apt-get install -y$$missing" >&2; exit 1; fi; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

## bench: every performance budget beside its physical limit, on one throw-away cluster (installs pg-activity, a baseline, if missing); writes BENCHMARKS.md
bench: deps
	@if ! command -v pg_activity >/dev/null 2>&1; then \
		echo "installing: pg-activity (the baseline of the dashboard's CPU at rest)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends pg-activity; \
	fi
	$(GO) run ./cmd/benchreport -out BENCHMARKS.md

clean:
	rm -rf bin
