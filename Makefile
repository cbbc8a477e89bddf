# gepard.c — the user's entry point.
#
#   make          build libgepard and the `gepard` command (build/release/)
#   make test     install missing packages, build with ASan+UBSan, run every test
#   make tokenizer-sweep  compare the tokenizer with Hugging Face's on all 1,112,064
#                 Unicode scalar values (needs node; see tests/test_tokenizer_hf.c)
#   make demo     install missing packages, build, and speak a sentence
#                 (SYNTHETIC=1: with random weights, no download)
#   make bench    build and run `gepard bench` on synthetic real-size weights
#   make bench-kernels  build and run the matrix-kernel micro-benchmark (BENCH_ARGS=...)
#   make deps     install the Debian packages the build needs
#   make check-deploy  check the deployment recipe (deploy/: Dockerfile, package lists,
#                 Kubernetes manifests, nginx, systemd) without Docker or a cluster;
#                 check-deploy-full also runs the image's build step and serves the result
#   make format   clang-format every source file
#   make fuzz     build the libFuzzer harnesses (fuzz/*.c, clang) into build/fuzz/ and run
#                 each for FUZZ_SECONDS (60); FUZZ_TARGETS="pickle tokenizer" picks some
#
# Kernels that need a particular instruction set live in files named
# *_avx2.c / *_avx512.c and are compiled with those flags only; the rest of
# the code is built for baseline x86-64 and picks kernels at run time.

CC ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif

BUILD ?= build
PKGS := libcjson libpcre2-8 libutf8proc libarchive yaml-0.1 libcurl libmicrohttpd sndfile \
        libopusenc soxr openblas flac libpulse-simple libavcodec libavutil gnutls
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# FFmpeg (AAC only) is opened at run time (src/io/avcodec_runtime.c): headers, no link.
PKG_LIBS = $(shell pkg-config --libs $(filter-out libavcodec libavutil,$(PKGS)) 2>/dev/null) \
           -lmp3lame -lsonic

WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wno-format-truncation
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc $(WARN) -fno-strict-aliasing
# oneDNN (prefill's bf16 matmul on AMX / AVX512-BF16, compute/onednn_matmul.c) has
# no pkg-config file in Debian; it runs on libgomp, whose omp.h comes with gcc.
LIBS = $(PKG_LIBS) -ldnnl -lgomp -lm -lpthread -ldl

# ---- the CUDA backend (a plugin opened at run time: src/cuda/, model/device.c) ----
# Built automatically when nvcc is found (CUDA=0 turns it off, CUDA=1 insists).
# The gepard binary never links CUDA; libgepard-cuda.so sits beside it.
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
ifeq ($(CUDA),)
CUDA := $(if $(NVCC),1,0)
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
# NVCC_EXTRA: compile-time switches of the CUDA kernels for A/B plugins
# (e.g. NVCC_EXTRA=-DD1C_KV_PREFETCH=0; rm -rf $(BUILD)/cuda first)
NVCC_EXTRA ?=
NVCC_FLAGS := -O3 -std=c++17 -Iinclude -Isrc $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
              -Werror all-warnings --expt-relaxed-constexpr $(NVCC_EXTRA)
CUDA_SRC := $(sort $(wildcard src/cuda/*.cu))
CUDA_OBJ := $(patsubst %.cu,$(BUILD)/cuda/%.o,$(CUDA_SRC))
CUDA_PLUGIN := $(BUILD)/release/libgepard-cuda.so
ifeq ($(CUDA),1)
ifeq ($(NVCC),)
$(error CUDA=1 but nvcc was not found: install the CUDA toolkit or set NVCC=/path/to/nvcc)
endif
CUDA_TARGETS := $(CUDA_PLUGIN)
endif

RELEASE_CFLAGS := -O2 -g -DNDEBUG -fno-math-errno
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined -fno-math-errno
AVX2_FLAGS := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni \
                -mfma -mf16c
AMX_FLAGS := -mamx-tile -mamx-bf16

LIB_SRC := $(sort $(wildcard src/base/*.c src/io/*.c src/compute/*.c src/compute/cpu/*.c \
             src/text/*.c src/model/*.c src/codec/*.c src/engine/*.c src/server/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c))
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

# ---- object lists per flavour ----
rel_obj = $(patsubst %.c,$(BUILD)/release/%.o,$(1))
asan_obj = $(patsubst %.c,$(BUILD)/asan/%.o,$(1))

REL_LIB := $(BUILD)/release/libgepard.a
ASAN_LIB := $(BUILD)/asan/libgepard.a
REL_BIN := $(BUILD)/release/gepard
ASAN_BIN := $(BUILD)/asan/gepard
ASAN_TESTS := $(BUILD)/asan/gepard-tests
REL_TESTS := $(BUILD)/release/gepard-tests
REL_EXAMPLES := $(patsubst examples/%.c,$(BUILD)/release/examples/%,$(EXAMPLE_SRC))
REL_BENCH_TOOLS := $(patsubst bench/%.c,$(BUILD)/release/bench/%,$(BENCH_SRC))

.PHONY: check-deploy check-deploy-full cuda test-cuda device-bundle all test demo bench bench-kernels deps format clean check-format \
        release asan examples bench-tools tokenizer-sweep fuzz fuzz-build fuzz-smoke

all: $(REL_BIN) $(REL_LIB) $(REL_EXAMPLES) $(CUDA_TARGETS)
	@ln -sf release/gepard $(BUILD)/gepard

cuda: $(CUDA_PLUGIN)

$(BUILD)/cuda/%.o: %.cu $(wildcard src/cuda/*.h src/cuda/*.cuh) src/model/device_plugin.h include/gepard.h
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(CUDA_PLUGIN): $(CUDA_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(NVCC) -shared -o $@ $^ -cudart static -L$(CUDA_HOME)/lib64 -lcublas \
	  -Xlinker -rpath=$(CUDA_HOME)/lib64 -Xlinker --no-undefined

release: all

deps:
	@sh scripts/install-deps.sh

# Flags by file name: *_avx2.c and *_avx512.c get their instruction sets, *_amx.c
# AVX-512 and the AMX tile instructions (called only where the CPU has them).
isa_flags = $(if $(findstring _amx,$(1)),$(AVX512_FLAGS) $(AMX_FLAGS),$(if $(findstring _avx512,$(1)),$(AVX512_FLAGS),$(if $(findstring _avx2,$(1)),$(AVX2_FLAGS),)))

$(BUILD)/release/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(BASE_CFLAGS) $(RELEASE_CFLAGS) $(call isa_flags,$<) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# The compute kernels (src/compute/) are built at -O2 in the ASan build too,
# still instrumented: at -O1 their SIMD loops ran ~2x slower, and the suite's
# real-size and codec tests spend most of their time there
# (real_size_cpu_greedy_codes 50 -> 26 s on a 2-core Zen 5 VM).
asan_opt = $(if $(findstring src/compute/,$(1)),-O2,)

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	@$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) $(call asan_opt,$<) $(call isa_flags,$<) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(REL_LIB): $(call rel_obj,$(LIB_SRC))
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(ASAN_LIB): $(call asan_obj,$(LIB_SRC))
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(REL_BIN): $(call rel_obj,$(CLI_SRC)) $(REL_LIB)
	@echo "  LD      $@"
	@$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(LIBS)

$(ASAN_BIN): $(call asan_obj,$(CLI_SRC)) $(ASAN_LIB)
	@echo "  LD asan $@"
	@$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LIBS)

$(ASAN_TESTS): $(call asan_obj,$(TEST_SRC)) $(ASAN_LIB)
	@echo "  LD asan $@"
	@$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LIBS)

$(REL_TESTS): $(call rel_obj,$(TEST_SRC)) $(REL_LIB)
	@echo "  LD      $@"
	@$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/release/examples/%: $(BUILD)/release/examples/%.o $(REL_LIB)
	@echo "  LD      $@"
	@$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/release/bench/%: $(BUILD)/release/bench/%.o $(REL_LIB)
	@echo "  LD      $@"
	@$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(LIBS)

# Hand-run micro-benchmarks (bench/*.c), not part of `make test`.
bench-tools: $(REL_BENCH_TOOLS)

examples: $(REL_EXAMPLES)

asan: $(ASAN_BIN) $(ASAN_TESTS)

# The suite runs the unit tests and drives the ASan-built `gepard` command.
# Its last line is "N passed, N failed". Before it, fuzz-smoke runs every
# libFuzzer harness briefly; a harness that fails is reported there ("fuzz
# X: FAILED") and makes `make test` exit 1 after the runner has finished.
test:
	@GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh
	@$(MAKE) --no-print-directory $(SUB_JOBS) asan
	@$(MAKE) --no-print-directory $(SUB_JOBS) all
	@rm -f $(BUILD)/fuzz-smoke.failed
	@$(MAKE) --no-print-directory $(SUB_JOBS) fuzz-smoke || touch $(BUILD)/fuzz-smoke.failed
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  GEPARD_BIN=$(ASAN_BIN) GEPARD_RELEASE_BIN=$(REL_BIN) $(ASAN_TESTS) $(TEST_ARGS); \
	  rc=$$?; [ ! -f $(BUILD)/fuzz-smoke.failed ] || exit 1; exit $$rc

# The GPU tests (tests/test_cuda.c) on a machine with an NVIDIA GPU: release
# build (CUDA and ASan do not mix), the CUDA plugin, then every test whose
# name contains "cuda". Without a GPU each one reports "skipped".
test-cuda:
	@$(MAKE) --no-print-directory $(SUB_JOBS) all CUDA=1
	@$(MAKE) --no-print-directory $(SUB_JOBS) $(REL_TESTS)
	GEPARD_BIN=$(REL_BIN) GEPARD_RELEASE_BIN=$(REL_BIN) $(REL_TESTS) cuda $(TEST_ARGS)

# Pack what the GPU machine needs into .device/ (git-ignored): gepard, the
# release test binary, prefill_bench, codec_bench, the CUDA plugin (xz-compressed: the
# device tool carries 64 MiB at most; scripts/device-run.sh unpacks it beside
# them), their
# Debian libraries and the shared fixtures. DEVICE_BASE_DIR=DIR also packs
# DIR/gepard, DIR/bench/prefill_bench and DIR/libgepard-cuda.so of another
# build (a release build folder), xz-compressed, as .device/base.tar.xz: the
# old side of `scripts/device-run.sh`'s old-vs-new runs (cpu, codec).
# Then, with the device tool:
#   run(command="scripts/device-run.sh all", carry=[".device"])
device-bundle:
	@$(MAKE) --no-print-directory $(SUB_JOBS) all CUDA=1
	@$(MAKE) --no-print-directory $(SUB_JOBS) $(REL_TESTS) $(BUILD)/release/bench/prefill_bench \
	  $(BUILD)/release/bench/codec_bench
	@rm -rf .device && mkdir -p .device/fixtures
	@sh ../shared/tools/device-bundle.sh .device $(REL_BIN) $(REL_TESTS) \
	  $(BUILD)/release/bench/prefill_bench $(BUILD)/release/bench/codec_bench
	@xz -T2 -c $(CUDA_PLUGIN) > .device/plugin.xz
	@if [ -n "$(DEVICE_BASE_DIR)" ]; then \
	  tar cJf .device/base.tar.xz -C $(DEVICE_BASE_DIR) gepard bench/prefill_bench \
	    $$(cd $(DEVICE_BASE_DIR) && ls libgepard-cuda.so 2>/dev/null); fi
	@cp -r ../shared/fixtures/model-tiny ../shared/fixtures/codec-tiny \
	  ../shared/fixtures/real-size ../shared/fixtures/README.md .device/fixtures/
	@du -sh .device

# The differential tokenizer tests with the full code-point sweep instead of
# the sampled one (several minutes; prints the mismatch counts).
check-deploy:
	@GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh
	@sh deploy/check-recipe.sh

check-deploy-full:
	@GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh
	@sh deploy/check-recipe.sh --full

tokenizer-sweep:
	@GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh
	@$(MAKE) --no-print-directory asan
	GEPARD_HF_SWEEP=1 $(ASAN_TESTS) tokenizer_hf

# The builds `make demo`, `make bench` and `make test` start run in parallel: -j with
# every CPU unless make was started with its own -j (the jobserver then
# shares that one).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUB_JOBS = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS))

demo: deps
	@$(MAKE) --no-print-directory $(SUB_JOBS) all
	@SYNTHETIC=$(SYNTHETIC) sh scripts/demo.sh $(REL_BIN)

bench: deps
	@$(MAKE) --no-print-directory $(SUB_JOBS) all
	@sh scripts/bench.sh $(REL_BIN)

# bench/kernels_bench.c: one decode step of real-size matrix products per
# weight format, thread count and batch size (see the file for options).
bench-kernels: $(REL_LIB)
	$(CC) $(BASE_CFLAGS) $(RELEASE_CFLAGS) -o $(BUILD)/release/kernels-bench \
	  bench/kernels_bench.c $(REL_LIB) $(LIBS)
	$(BUILD)/release/kernels-bench $(BENCH_ARGS)

# ---- libFuzzer harnesses (fuzz/*.c; see fuzz/README.md) ----
# The library is rebuilt with clang and -fsanitize=fuzzer-no-link,address,undefined
# into build/fuzz/obj/ (the release and asan objects are gcc's); each harness
# links against that archive. `make fuzz` runs every target FUZZ_SECONDS on
# one core at low priority (FUZZ_JOBS=N: N at once); `make test` runs each for
# FUZZ_SMOKE_SECONDS, FUZZ_SMOKE_JOBS (one per CPU) at once.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_JOBS ?= 1
FUZZ_SMOKE_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_NAMES := $(patsubst fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_CFLAGS := -Wno-unknown-warning-option -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=undefined -fno-math-errno
FUZZ_LIB := $(BUILD)/fuzz/libgepard-fuzz.a
FUZZ_EXTRA_OBJ := $(BUILD)/fuzz/obj/src/cli/codes_json.o
FUZZ_BINS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_NAMES))
FUZZ_HAVE_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC fuzz $<"
	@$(FUZZ_CC) $(BASE_CFLAGS) $(FUZZ_CFLAGS) $(call isa_flags,$<) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRC))
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/fuzz/fuzz_%.o $(FUZZ_EXTRA_OBJ) $(FUZZ_LIB)
	@echo "  LD fuzz $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

fuzz-build: $(FUZZ_BINS)

.SECONDARY: $(patsubst %,$(BUILD)/fuzz/obj/fuzz/fuzz_%.o,$(FUZZ_NAMES)) $(FUZZ_EXTRA_OBJ)

# Seed corpora: fuzz/seeds/<target>/ (checked in) plus fixture-derived
# seeds that scripts/fuzz-seeds.sh writes into build/fuzz/seeds/<target>/.
# New inputs found go to build/fuzz/corpus/<target>/ (git-ignored).
fuzz:
	@if [ -z "$(FUZZ_HAVE_CC)" ]; then echo "fuzz: skipped ($(FUZZ_CC) not found)"; exit 1; fi
	@$(MAKE) --no-print-directory fuzz-build
	@sh scripts/fuzz-seeds.sh $(BUILD)/fuzz/seeds
	@FUZZ_JOBS=$(FUZZ_JOBS) sh scripts/fuzz-run.sh $(BUILD)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# A short run of every harness, part of `make test`: fails the build on a
# crash, prints "skipped" without clang.
fuzz-smoke:
	@if [ -z "$(FUZZ_HAVE_CC)" ]; then echo "fuzz: skipped ($(FUZZ_CC) not found; the harnesses need clang)"; \
	else $(MAKE) --no-print-directory fuzz-build && sh scripts/fuzz-seeds.sh $(BUILD)/fuzz/seeds && \
	  FUZZ_JOBS=$(FUZZ_SMOKE_JOBS) sh scripts/fuzz-run.sh $(BUILD)/fuzz $(FUZZ_SMOKE_SECONDS) $(FUZZ_NAMES); fi

FORMAT_FILES = $(shell find include src tests examples bench fuzz -name '*.[ch]' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)

check-format:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
