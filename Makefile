# A thin wrapper over CMake. `make run` and `make test` work on a fresh Debian 12
# machine: scripts/deps.sh installs what is missing first.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# Empty: the default config embedded in the library (conf/mqr.yaml); or CONFIG=FILE.
CONFIG     ?=
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

# mqrd in the foreground on conf/mqr.yaml (or CONFIG=FILE); Ctrl-C stops it cleanly.
run: build
	@echo "== mqrd $(if $(CONFIG),--config $(CONFIG),(the embedded conf/mqr.yaml)) on tcp://127.0.0.1:61616"
	@echo "   In another terminal:"
	@echo "     $(BUILD)/client/mqr send --body hello --count 3 orders        # ANYCAST to the queue orders"
	@echo "     $(BUILD)/client/mqr recv --count 3 orders                     # take them"
	@echo "     $(BUILD)/client/mqr send --body hi news.europe                # MULTICAST: news.europe.reader and news.all"
	@echo "     $(BUILD)/client/mqr recv news.all"
	@echo "     $(BUILD)/client/mqr stat                                      # addresses, queues, counters"
	@echo "   Ctrl-C (SIGINT) stops mqrd cleanly; SIGHUP reloads the config."
	@echo
	@exec $(BUILD)/broker/mqrd $(CFG_ARG)

$(BUILD_ASAN)/CMakeCache.txt: | deps
	CC=clang cmake -S . -B $(BUILD_ASAN) -DMQR_SANITIZE=ON -DMQR_WERROR=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS)

test-asan: deps $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -L "unit|cli|fuzz|integration"

test: build test-asan
	ctest --test-dir $(BUILD) --output-on-failure

# The whole suite, then docs/benchmarks.md and docs/bench/*.svg regenerated from the
# JSON. Two forks as the harness's defaults, but 2 warmup and 3 measurement iterations of
# 500 ms (the harness defaults to 3 and 5) so that the 53 trials fit in about 5 minutes.
BENCH_ARGS ?= -f 5 -wi 1 -i 1
bench: build
	@mkdir -p $(BUILD)/bench
	@rc=0; $(BUILD)/jmh-like-bench/mqr-bench $(BENCH_ARGS) --json $(BUILD)/bench/results.json \
	  > $(BUILD)/bench/results.txt || rc=$$?; cat $(BUILD)/bench/results.txt; exit $$rc
	/usr/bin/python3 jmh-like-bench/report $(BUILD)/bench/results.json docs

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
