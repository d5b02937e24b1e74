# The two commands of the README: `make demo` (build + run the built-in model) and `make test`.
# Everything else is CMake; this file only sequences set-up, builds and test runs.
BUILD    ?= build
ASAN     ?= build-asan
FUZZ     ?= build-fuzz
PYTHON   ?= python3
JOBS     ?= $(shell nproc)
DEMO_DIR := $(BUILD)/demo

.PHONY: all deps deps-test build demo test test-unit test-asan fuzz clean

all: build

deps:
	@scripts/setup.sh build

deps-test:
	@scripts/setup.sh test

build:
	@cmake -S . -B $(BUILD) -DWPK_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# Build a small ResNet-style model (random weights), describe it, run it.
demo: deps build
	@$(PYTHON) tests/models/gen_models.py --models resnet_like $(DEMO_DIR) >/dev/null
	@$(BUILD)/wpk info $(DEMO_DIR)/resnet_like.onnx
	@$(BUILD)/wpk run $(DEMO_DIR)/resnet_like.onnx -o $(DEMO_DIR)/out --iters 10
	@$(PYTHON) -c "import numpy as np; y=np.load('$(DEMO_DIR)/out/logits.npy'); \
	  print('top-5 classes:', np.argsort(-y[0])[:5].tolist())"

# The whole suite: warnings as errors, unit + conformance + model + CLI tests, the same under
# ASan+UBSan, a short fuzzing run, and the torchvision models against ONNX Runtime.
test: deps-test build
	@cd $(BUILD) && ctest --output-on-failure -j2 -LE slow
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory fuzz
	@cd $(BUILD) && WPK_REQUIRE_TORCH=1 ctest --output-on-failure -L slow

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
