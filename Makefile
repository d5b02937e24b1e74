# The two commands of the README: `make demo` (build, run, tune and bench the built-in model) and
# `make test`. Everything else is CMake; this file only sequences set-up, builds and test runs.
# `make help` lists the targets.
BUILD    ?= build
ASAN     ?= build-asan
FUZZ     ?= build-fuzz
PYTHON   ?= python3
JOBS     ?= $(shell nproc)
DEMO_DIR := $(BUILD)/demo
DEMO_TUNE ?= 60s
DEMO_MODEL := $(DEMO_DIR)/resnet_like.onnx

.PHONY: all help deps deps-test build build-quiet demo test test-unit test-asan fuzz clean

all: build

help:
	@echo "make demo       set up, build, then on a small ResNet-style model (random weights):"
	@echo "                wpk info, wpk run, wpk tune for DEMO_TUNE (default 60s) into"
	@echo "                $(DEMO_DIR)/records.db, wpk compile a tuned and an untuned plan,"
	@echo "                wpk bench both side by side (about 2 minutes)"
	@echo "make test       set up, build and pass the whole suite (what CI runs: .ci/run)"
	@echo "make build      configure and build into BUILD (default: build)"
	@echo "make test-asan  the suite under ASan+UBSan;  make fuzz: 30 s of libFuzzer"
	@echo "make clean      remove the build directories"

deps:
	@scripts/setup.sh build

deps-test:
	@scripts/setup.sh test

build:
	@cmake -S . -B $(BUILD) -DWPK_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The demo's build: its log kept in the build dir, shown only when the build fails.
build-quiet:
	@echo "== building wpk (log: $(BUILD)/build.log)"
	@mkdir -p $(BUILD) && { cmake -S . -B $(BUILD) -DWPK_WERROR=ON && \
	  cmake --build $(BUILD) -j$(JOBS); } >$(BUILD)/build.log 2>&1 || \
	  { cat $(BUILD)/build.log; echo "make demo: the build failed (above)"; exit 1; }

# The demo: a small ResNet-style model (random weights) described, run, tuned on this machine for
# DEMO_TUNE into a records database under the build dir (a rerun continues it), compiled into a
# tuned plan and an untuned one (no records: every kernel at its template's default), and the
# two benched side by side: the tuned plan's per-node table, then both latencies and the ratio.
demo: deps build-quiet
	@$(PYTHON) tests/models/gen_models.py --models resnet_like $(DEMO_DIR) >/dev/null
	@echo "== wpk info: the model" && $(BUILD)/wpk info $(DEMO_MODEL)
	@echo && echo "== wpk run: seeded random input, generated kernels" && \
	  $(BUILD)/wpk run $(DEMO_MODEL) -o $(DEMO_DIR)/out --iters 10
	@$(PYTHON) -c "import numpy as np; y=np.load('$(DEMO_DIR)/out/logits.npy'); \
	  print('top-5 classes:', np.argsort(-y[0])[:5].tolist())"
	@echo && echo "== wpk tune --time $(DEMO_TUNE): kernel schedules measured on this machine" && \
	  $(BUILD)/wpk tune $(DEMO_MODEL) --time $(DEMO_TUNE) --db $(DEMO_DIR)/records.db
	@echo && echo "== wpk compile: a tuned plan and an untuned one" && \
	  $(BUILD)/wpk compile $(DEMO_MODEL) --db $(DEMO_DIR)/records.db -o $(DEMO_DIR)/tuned.wpk && \
	  $(BUILD)/wpk compile $(DEMO_MODEL) --db '' -o $(DEMO_DIR)/untuned.wpk
	@echo && echo "== wpk bench: the tuned plan" && \
	  $(BUILD)/wpk bench $(DEMO_DIR)/tuned.wpk --top 10 --iters 50
	@for round in 1 2; do for plan in untuned tuned; do \
	  $(BUILD)/wpk bench $(DEMO_DIR)/$$plan.wpk --json --iters 200 > $(DEMO_DIR)/$$plan.$$round.json || exit 1; \
	  done; done
	@echo && echo "== side by side (2 alternating rounds of 200 runs each; the better round's median)" && \
	  $(PYTHON) -c "import json; \
	  r = {n: min((json.load(open('$(DEMO_DIR)/%s.%d.json' % (n, k))) for k in (1, 2)), key=lambda j: j['latency_ms']['median']) for n in ('untuned', 'tuned')}; \
	  [print('%-8s median %7.3f ms  min %7.3f ms  p90 %7.3f ms  %8.1f samples/s  nodes by source: %s' % (n, j['latency_ms']['median'], \
	  j['latency_ms']['min'], j['latency_ms']['p90'], j['throughput'], j['sources'])) for n, j in r.items()]; \
	  print('tuned / untuned speed: x%.2f (a sub-millisecond model on a shared machine: expect noise)' % \
	  (r['untuned']['latency_ms']['median'] / r['tuned']['latency_ms']['median']))"

# The whole suite: warnings as errors, unit + conformance + model + CLI tests, the same under
# ASan+UBSan, a short fuzzing run, and the torchvision models against ONNX Runtime.
test: deps-test build
	@cd $(BUILD) && ctest --output-on-failure -j2 -LE slow
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory fuzz
	@cd $(BUILD) && WPK_REQUIRE_TORCH=1 ctest --output-on-failure -j2 -L slow

test-asan:
	@cmake -S . -B $(ASAN) -DWPK_WERROR=ON -DWPK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build $(ASAN) -j$(JOBS)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 -LE slow

fuzz:
	@CC=clang cmake -S . -B $(FUZZ) -DWPK_FUZZ=ON -DWPK_SANITIZE=ON >/dev/null
	@cmake --build $(FUZZ) -j$(JOBS) --target fuzz_model_reader
	@mkdir -p $(FUZZ)/corpus && cp -n tests/fuzz/corpus/* $(FUZZ)/corpus/ 2>/dev/null || true
	@$(FUZZ)/fuzz_model_reader -max_total_time=30 -rss_limit_mb=2048 $(FUZZ)/corpus tests/fuzz/corpus

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
