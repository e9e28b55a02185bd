# A thin wrapper over CMake. `make run`, `make test` and `make bench` work on a fresh
# Debian 12 machine: scripts/deps.sh installs what each is missing first (run: only what
# building and running needs; test: the test tools too; bench: the benchmarks' peers).
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# Empty: the default config embedded in the library (conf/mqr.yaml); or CONFIG=FILE.
CONFIG     ?=
CFG_ARG     = $(if $(CONFIG),--config $(CONFIG),)
# The embedded config's journal goes under the build; a CONFIG names its own.
DATA_ARG    = $(if $(CONFIG),,--data-dir $(BUILD)/mqr-data)

.PHONY: all deps deps-test deps-bench configure build build-run run test test-asan crash-test cluster-test bench bench-docs format clean

all: build

deps:
	@bash scripts/deps.sh run
deps-test:
	@bash scripts/deps.sh test
deps-bench:
	@bash scripts/deps.sh bench

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DMQR_WERROR=ON $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# What running needs, and nothing else: mqrd and mqr (no tests, no doc examples).
build-run: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target mqrd mqr

# mqrd in the foreground on conf/mqr.yaml (or CONFIG=FILE); Ctrl-C stops it cleanly.
run: build-run
	@$(BUILD)/daemon/mqrd --check $(CFG_ARG) >/dev/null
	@url=$$($(BUILD)/daemon/mqrd --urls $(CFG_ARG) | head -1); \
	 echo "== mqrd $(if $(CONFIG),--config $(CONFIG),(the embedded conf/mqr.yaml)) on $${url:-no listener}"; \
	 case "$$url" in *:0) echo "   (port 0: the port it gets is in mqrd's 'ready on' line below)";; esac; \
	 echo "   In another terminal:"; \
	 echo "     $(BUILD)/cli/mqr send --url $$url --body hello --count 3 orders   # ANYCAST to the queue orders"; \
	 echo "     $(BUILD)/cli/mqr recv --url $$url --count 3 orders                # take them"; \
	 echo "     $(BUILD)/cli/mqr stat --url $$url                                 # addresses, queues, counters"; \
	 echo "   Durable messages (mqr send --durable) are kept in $(if $(CONFIG),the config's persistence directory,$(BUILD)/mqr-data)."; \
	 echo "   Ctrl-C (SIGINT) stops mqrd cleanly; SIGHUP reloads the config."; echo
	@exec $(BUILD)/daemon/mqrd $(CFG_ARG) $(DATA_ARG)

$(BUILD_ASAN)/CMakeCache.txt: | deps
	CC=clang cmake -S . -B $(BUILD_ASAN) -DMQR_SANITIZE=ON -DMQR_WERROR=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS)

test-asan: deps-test $(BUILD_ASAN)/CMakeCache.txt
	cmake -S . -B $(BUILD_ASAN) -DMQR_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -L "unit|cli|fuzz|integration"

test: deps-test build test-asan
	cmake -S . -B $(BUILD) -DMQR_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure

# The whole suite: results in $(BUILD)/bench/ (results.txt, results.json, and the report
# benchmarks.md with its charts). Five forks of one warmup and one measurement iteration
# each: the 236 trials (brokers of their own started for most) took 37 minutes on 2 cores.
BENCH_ARGS ?= -f 5 -wi 1 -i 1
# The crash loop (tests/integration/test_crash.c) for longer than make test runs it:
# CRASH_SECONDS of kill -9 rounds against the sanitizer build's mqrd.
CRASH_SECONDS ?= 600
crash-test: deps-test $(BUILD_ASAN)/CMakeCache.txt
	cmake -S . -B $(BUILD_ASAN) -DMQR_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target mqrd test_crash
	MQRD=$(BUILD_ASAN)/daemon/mqrd MQR_CRASH_SECONDS=$(CRASH_SECONDS) $(BUILD_ASAN)/tests/test_crash

# The cluster under faults (tests/cluster/test_nemesis.py) for longer than make test runs
# it: NEMESIS_SECONDS of partitions, delays, kills, pauses and failing disks against three
# mqrd nodes, then as long with clients going to any node (forwarded sends, fed consumers).
NEMESIS_SECONDS ?= 300
cluster-test: deps-test build
	cmake -S . -B $(BUILD) -DMQR_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target mqrd mqr mqr_diskfault
	NEMESIS_SECONDS=$(NEMESIS_SECONDS) /usr/bin/python3 tests/cluster/test_nemesis.py $(BUILD)/daemon/mqrd $(BUILD)/cli/mqr \
	  $(BUILD)/tests/libmqr_diskfault.so
	NEMESIS_SECONDS=$(NEMESIS_SECONDS) NEMESIS_FEED=1 /usr/bin/python3 tests/cluster/test_nemesis.py $(BUILD)/daemon/mqrd \
	  $(BUILD)/cli/mqr $(BUILD)/tests/libmqr_diskfault.so

bench: deps-bench build
	cmake -S . -B $(BUILD) -DMQR_BUILD_BENCH=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	@mkdir -p $(BUILD)/bench
	@rc=0; $(BUILD)/jmh-like-bench/mqr-bench $(BENCH_ARGS) --json $(BUILD)/bench/results.json \
	  > $(BUILD)/bench/results.txt || rc=$$?; cat $(BUILD)/bench/results.txt; exit $$rc
	/usr/bin/python3 jmh-like-bench/report $(BUILD)/bench/results.json $(BUILD)/bench
	@echo "== report: $(BUILD)/bench/benchmarks.md"

# The tracked docs/benchmarks.md and docs/bench/*.svg, from the last `make bench`.
bench-docs:
	@test -f $(BUILD)/bench/results.json || { echo "make bench first"; exit 1; }
	/usr/bin/python3 jmh-like-bench/report $(BUILD)/bench/results.json docs

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
