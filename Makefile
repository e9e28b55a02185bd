# A thin wrapper over CMake. `make run` and `make test` work on a fresh Debian 12
# machine: scripts/deps.sh installs what is missing first.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# Empty: the default config embedded in the library (conf/mqr.yaml); or CONFIG=FILE.
CONFIG     ?=
CFG_FILE    = $(CONFIG)
CFG_ARG     = $(if $(CONFIG),--config $(CONFIG),)

.PHONY: all deps configure build run test test-asan bench format clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DMQR_WERROR=ON $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# Until mqrd exists (issue 5): the default config's routing table and a dry run of sends.
run: build
	@echo "== mqr config check $(CFG_FILE)"
	@$(BUILD)/client/mqr config check $(CFG_FILE)
	@echo
	@echo "== mqr config show $(CFG_FILE)"
	@$(BUILD)/client/mqr config show $(CFG_FILE)
	@echo
	@echo "== mqr route $(CFG_ARG) --count 4 jobs              (ANYCAST, round-robin)"
	@$(BUILD)/client/mqr route $(CFG_ARG) --count 4 jobs
	@echo "== mqr route $(CFG_ARG) news.europe                 (MULTICAST + wildcard news.#)"
	@$(BUILD)/client/mqr route $(CFG_ARG) news.europe
	@echo "== mqr route $(CFG_ARG) --count 2 --dup-id order-42 orders"
	@$(BUILD)/client/mqr route $(CFG_ARG) --count 2 --dup-id order-42 orders
	@echo "== mqr route $(CFG_ARG) --routing-type MULTICAST orders.eu  (no route -> DLQ)"
	@$(BUILD)/client/mqr route $(CFG_ARG) --routing-type MULTICAST orders.eu
	@echo "== mqr route $(CFG_ARG) --json multicast://news"
	@$(BUILD)/client/mqr route $(CFG_ARG) --json multicast://news
	@echo "== mqr route $(CFG_ARG) 'news.#'                    (refused: wildcard)"
	@$(BUILD)/client/mqr route $(CFG_ARG) 'news.#' || true

$(BUILD_ASAN)/CMakeCache.txt: | deps
	CC=clang cmake -S . -B $(BUILD_ASAN) -DMQR_SANITIZE=ON -DMQR_WERROR=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS)

test-asan: deps $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -L "unit|cli|fuzz|integration"

test: build test-asan
	ctest --test-dir $(BUILD) --output-on-failure

# The whole suite with the harness defaults (-wi 3 -i 5 -w 500ms -r 500ms -f 2), then
# docs/benchmarks.md and docs/bench/*.svg regenerated from the JSON.
BENCH_ARGS ?=
bench: build
	@mkdir -p $(BUILD)/bench
	@rc=0; $(BUILD)/jmh-like-bench/mqr-bench $(BENCH_ARGS) --json $(BUILD)/bench/results.json \
	  > $(BUILD)/bench/results.txt || rc=$$?; cat $(BUILD)/bench/results.txt; exit $$rc
	/usr/bin/python3 jmh-like-bench/report $(BUILD)/bench/results.json docs

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
