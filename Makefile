# locktop: the two commands a new user runs are `make demo` and `make test`.
# Both install what they need (the PostgreSQL server and tmux) when missing.

GO       ?= go
BIN      := bin/locktop
GOFLAGS  ?=
export GOFLAGS

.PHONY: demo test build deps vet fmt-check bench clean

## demo: build and open the dashboard on a throw-away PostgreSQL with the simulator
demo: deps build
	./$(BIN)

## test: vet, formatting, and every test (a real PostgreSQL included) with -race
test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 20m ./...

build:
	$(GO) build -o $(BIN) .

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## deps: install the PostgreSQL server and tmux with apt-get if they are missing
deps:
	@missing=""; \
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then missing="$$missing postgresql"; fi; \
	if ! command -v pgbench >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then missing="$$missing postgresql-client"; fi; \
	if ! command -v tmux >/dev/null 2>&1; then missing="$$missing tmux"; fi; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; \
		elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; \
		else echo "locktop needs:$$missing; install them with: apt-get install -y$$missing" >&2; exit 1; fi; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

## bench: lock core benchmarks beside pgbench on one throw-away cluster
bench: deps build
	$(GO) test -c -o bin/lockcore.test ./lockcore
	./$(BIN) cluster -- sh -c '\
		cd lockcore && ../bin/lockcore.test -test.run "^$$" -test.bench . -test.benchtime 5s -test.count 1; cd ..; \
		echo "pgbench lock-cycle.sql (1 client):"; pgbench -n -M prepared -f ../shared/bench/lock-cycle.sql -c 1 -T 10 | grep -E "latency average|tps"; \
		echo "pgbench contended.sql (8 clients):"; pgbench -n -M prepared -f ../shared/bench/contended.sql -c 8 -j 2 -T 10 | grep -E "latency average|tps"'

clean:
	rm -rf bin
