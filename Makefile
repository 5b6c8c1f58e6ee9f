# ptserve — thin wrappers over scripts/setup.sh, CMake, ctest and pytest.
#
#   make run    serve examples/models on :8000 (extra flags: ARGS="--log-verbose 1")
#   make test   everything CI runs: -Werror build, unit and end-to-end tests,
#               the deployment tests (tests/deploy: manifests, the container
#               image built and served from, a rolling restart behind
#               HAProxy; as root),
#               then unit and e2e again under AddressSanitizer + UBSan, then
#               a short fuzz run (10 s per driver)
#   make fuzz   every libFuzzer driver for FUZZ_SECONDS each (default 60)
#   make image  the container image (deploy/Containerfile, built by buildah:
#               scripts/image.sh), tagged localhost/ptserve:latest
#   make bench  the CPU benchmarks (bench/harness.py cpu-set: cpu, cache, trace,
#               ensemble, overload, triton, aoti → bench/<scenario>/results/;
#               BENCH="cpu cache" runs some of them)
#
# Smaller steps: build, unit, e2e, deploy-test, image, asan, models, clean.
# Every step installs what it needs first (scripts/setup.sh is quiet and quick
# when nothing is missing). A failing step stops make with a non-zero status.

# The project venv (scripts/setup.sh): its torch provides LibTorch, and its
# interpreter runs the tests and the model generators.
VENV       ?= $(CURDIR)/.venv
PYTHON     ?= $(VENV)/bin/python
export PTS_MODELS_PYTHON := $(PYTHON)
export PTS_VENV := $(VENV)
JOBS       ?= 2
BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
ARGS       ?=
PYTEST_ARGS ?=
# More CMake options, e.g. CMAKE_EXTRA=-DPTS_WITH_TORCH=OFF for a build without LibTorch.
CMAKE_EXTRA ?=

# PTS_WERROR is sticky in the CMake cache: `make run` keeps whatever the last
# configure chose, the test targets force it on.
WERROR ?=
CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo $(if $(WERROR),-DPTS_WERROR=$(WERROR)) -DPTS_PYTHON=$(PYTHON) $(CMAKE_EXTRA)

# LibTorch is not built with the sanitizers: its ODR-duplicated globals and
# new/free pairs across its own libraries would be false reports, and the
# suppression file lists the few leaks that live inside libtorch/OpenMP.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:detect_odr_violation=0:alloc_dealloc_mismatch=0 \
          LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

MODELS_STAMP = $(BUILD_DIR)/.examples-generated
AOTI_STAMP   = $(BUILD_DIR)/.examples-aoti-exported

# libFuzzer drivers (tests/fuzz): a clang build of their own.
FUZZ_DIR     ?= build-fuzz
FUZZ_SECONDS ?= 60

# Steps share build directories and the two CPU cores cmake already uses.
.NOTPARALLEL:
.PHONY: run test setup build unit e2e deploy-test image asan asan-build fuzz fuzz-build models bench clean

run: build models
	exec $(BUILD_DIR)/ptserve --model-repository examples/models $(ARGS)

test: WERROR = ON
test: FUZZ_SECONDS = 10
# Apple's clang has no libFuzzer: the short fuzz run is a Linux step.
test: unit e2e deploy-test asan $(if $(filter Linux,$(shell uname -s)),fuzz)

setup:
	@scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)
	cmake --build $(BUILD_DIR) -j$(JOBS)

unit: WERROR = ON
unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure

e2e: WERROR = ON
e2e: build
	PTSERVE_BIN=$(CURDIR)/$(BUILD_DIR)/ptserve $(PYTHON) -m pytest -q tests/e2e $(PYTEST_ARGS)

# The container image of deploy/Containerfile, built with buildah (no daemon:
# scripts/image.sh). Linux, as root.
IMAGE ?= localhost/ptserve:latest

image: setup
	scripts/image.sh $(IMAGE)

deploy-test: WERROR = ON
deploy-test: build $(if $(filter Linux,$(shell uname -s)),image)
	PTS_IMAGE=$(IMAGE) PTSERVE_BIN=$(CURDIR)/$(BUILD_DIR)/ptserve $(PYTHON) -m pytest -q tests/deploy $(PYTEST_ARGS)

asan-build: setup
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DPTS_SANITIZE=ON -DPTS_WERROR=ON -DPTS_PYTHON=$(PYTHON) $(CMAKE_EXTRA)
	cmake --build $(ASAN_DIR) -j$(JOBS)

asan: asan-build
	$(SAN_ENV) ctest --test-dir $(ASAN_DIR) --output-on-failure
	$(SAN_ENV) PTSERVE_BIN=$(CURDIR)/$(ASAN_DIR)/ptserve $(PYTHON) -m pytest -q tests/e2e $(PYTEST_ARGS)

fuzz-build: setup
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DPTS_FUZZ=ON -DPTS_WITH_TORCH=OFF -DPTS_BUILD_TESTS=OFF
	cmake --build $(FUZZ_DIR) -j$(JOBS)

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The example model files are generated, not committed. Regenerate when
# the generator changed or a model file is missing.
models: setup
	@mkdir -p $(BUILD_DIR)
	@if [ ! -e $(MODELS_STAMP) ] || [ examples/gen_models.py -nt $(MODELS_STAMP) ] \
	    || ! ls examples/models/*/1/model.pt >/dev/null 2>&1; then \
	  echo "$(PYTHON) examples/gen_models.py"; \
	  $(PYTHON) examples/gen_models.py && touch $(MODELS_STAMP); \
	fi
	@if [ ! -e $(AOTI_STAMP) ] || [ examples/export_aoti.py -nt $(AOTI_STAMP) ] \
	    || [ examples/gen_models.py -nt $(AOTI_STAMP) ] \
	    || ! ls examples/models/*/1/model.pt2 >/dev/null 2>&1; then \
	  echo "$(PYTHON) examples/export_aoti.py  # AOTInductor compiles C++: about a minute"; \
	  $(PYTHON) examples/export_aoti.py && touch $(AOTI_STAMP); \
	fi

BENCH      ?= cpu-set
bench: setup
	$(PYTHON) bench/harness.py $(BENCH)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR) tests/e2e/.cache  # the venv stays: rm -rf .venv
	rm -f examples/models/*/[0-9]*/model.pt examples/models/*/[0-9]*/model.pt2
