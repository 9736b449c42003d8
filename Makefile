# ragtrain — build, test and demo. Paths are overridable: make CUDA_HOME=/opt/cuda HDF5_HOME=/opt/hdf5
# Useful switches: DEBUG=1 (no optimisation), SANITIZE=address,undefined, PORTABLE=1 (static HDF5 + Boost.PO,
# for running the binary on machines that lack them, such as the GPU machine), NP=2 (ranks for `make demo`).

CUDA_HOME ?= /usr/local/cuda
MPI_HOME  ?= /usr/lib/x86_64-linux-gnu/openmpi
HDF5_HOME ?= /usr/lib/x86_64-linux-gnu/hdf5/openmpi
HDF5_INC  ?= /usr/include/hdf5/openmpi
CUDA_ARCH ?= sm_90
CXX       := g++
NVCC      := $(CUDA_HOME)/bin/nvcc
# A sanitizer build goes to its own folder, so that `make test SANITIZE=address,undefined` never mixes objects.
BUILD     ?= $(if $(SANITIZE),build-san,build)
NP        ?= 2
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)

# `make` alone builds the binary: rules for generated files come before `all` below.
.DEFAULT_GOAL := all

# ---- detection (each test can fail: it looks for the real header or library) ----
have = $(if $(wildcard $(1)),1,0)
HAVE_MPI   := $(call have,$(MPI_HOME)/include/mpi.h)
HAVE_HDF5  := $(call have,$(HDF5_INC)/H5FDmpio.h)
HAVE_BOOST := $(if $(wildcard /usr/include/boost/program_options.hpp $(BOOST_HOME)/include/boost/program_options.hpp),1,0)
HAVE_GTEST := $(call have,/usr/include/gtest/gtest.h)
HAVE_MINIZIP := $(call have,/usr/include/minizip/unzip.h)
HAVE_NVCC  := $(call have,$(NVCC))
HAVE_CUDNN := $(if $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h),1,0)
HAVE_NCCL  := $(if $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),1,0)
WITH_CUDA  ?= $(if $(and $(filter 111,$(HAVE_NVCC)$(HAVE_CUDNN)$(HAVE_NCCL)),$(wildcard src/backend/cuda)),1,0)

mark = $(if $(filter 1,$(1)),✓,✗)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean help deps,$(MAKECMDGOALS)),)
$(info ragtrain build: $(call mark,$(HAVE_MPI)) Open MPI  $(call mark,$(HAVE_HDF5)) parallel HDF5  $(call mark,$(HAVE_BOOST)) Boost.PO  $(call mark,$(HAVE_GTEST)) GoogleTest  $(call mark,$(HAVE_MINIZIP)) minizip  $(call mark,$(HAVE_NVCC)) CUDA  $(call mark,$(HAVE_CUDNN)) cuDNN  $(call mark,$(HAVE_NCCL)) NCCL  -> $(if $(filter 1,$(WITH_CUDA)),CPU + CUDA backends,CPU backend only))
endif
endif

# ---- flags ----
OPT := $(if $(filter 1,$(DEBUG)),-O0,-O2)
SAN := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
CPPFLAGS := -Iinclude -I$(HDF5_INC) -I$(MPI_HOME)/include -DOMPI_SKIP_MPICXX=1 -MMD -MP
CXXFLAGS := -std=c++17 $(OPT) -g -Wall -Wextra -Wpedantic -Wshadow $(SAN)
MPI_LIBS := -L$(MPI_HOME)/lib -lmpi
ifeq ($(PORTABLE),1)
HDF5_LIBS  := /usr/lib/x86_64-linux-gnu/libhdf5_openmpi.a -lsz -laec -lz -ldl -lm
BOOST_LIBS := -Wl,-Bstatic -lboost_program_options -Wl,-Bdynamic
# minizip reads .npz archives (src/data/npz_import.cpp says why); static, as the GPU machine lacks it.
ZIP_LIBS   := -Wl,-Bstatic -lminizip -Wl,-Bdynamic -lz
else
HDF5_LIBS  := -L$(HDF5_HOME)/lib -lhdf5
BOOST_LIBS := -lboost_program_options
ZIP_LIBS   := -lminizip -lz
endif
LDLIBS := $(HDF5_LIBS) $(BOOST_LIBS) $(ZIP_LIBS) $(MPI_LIBS) -lpthread
LDFLAGS := $(SAN) -Wl,-rpath,$(HDF5_HOME)/lib

ifeq ($(WITH_CUDA),1)
CPPFLAGS  += -DRAGTRAIN_WITH_CUDA=1 -I$(CUDA_HOME)/include
NVCCFLAGS := -std=c++17 -O3 -arch=$(CUDA_ARCH) -Iinclude -I$(CUDA_HOME)/include -I$(MPI_HOME)/include -I$(HDF5_INC) \
             -DOMPI_SKIP_MPICXX=1 -DRAGTRAIN_WITH_CUDA=1 -MMD -MP -Xcompiler -Wall
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudnn -lnccl -lcudart_static -lrt -ldl
CU_SRCS   := $(shell find src -name '*.cu')
endif

# ---- sources ----
LIB_SRCS  := $(filter-out src/main.cpp,$(shell find src -name '*.cpp' -not -path 'src/backend/cuda/*'))
ifeq ($(WITH_CUDA),1)
LIB_SRCS  += $(shell find src/backend/cuda -name '*.cpp' 2>/dev/null)
endif
LIB_OBJS  := $(LIB_SRCS:%.cpp=$(BUILD)/obj/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/%.cu.o)
LIB       := $(BUILD)/lib/libragtrain.a
BIN       := $(BUILD)/bin/ragtrain

# The git revision for provenance (summary.json, bench JSON): a generated header rewritten only when the
# revision changes, so that only provenance.o rebuilds. Outside a git checkout (a tarball) it is "unknown".
GIT_REV := $(shell git -C $(CURDIR) describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
GEN_REV := $(BUILD)/gen/git_revision.hpp
$(GEN_REV): FORCE
	@mkdir -p $(dir $@)
	@echo '#define RAGTRAIN_GIT_REVISION "$(GIT_REV)"' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/src/metrics/provenance.o: $(GEN_REV)
$(BUILD)/obj/src/metrics/provenance.o: CPPFLAGS += -I$(BUILD)/gen
FORCE:

TEST_MAIN := $(BUILD)/obj/tests/test_main.o
UNIT_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/unit/*.cpp))
MPI_OBJS  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/mpi/*.cpp))
E2E_OBJS  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/e2e/*.cpp))
GPU_OBJS  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/gpu/*.cpp))
TEST_BINS := $(BUILD)/bin/unit_tests $(BUILD)/bin/mpi_tests $(BUILD)/bin/e2e_tests
GTEST_LIBS := -lgtest

.PHONY: all deps test test-gpu bench-gpu demo plot clean help fuzz FORCE
all: $(BIN)

help:
	@sed -n '1,4p' Makefile
	@echo "targets: all (default), deps, test, test-gpu, bench-gpu, demo, plot RUN=DIR, fuzz [FUZZ_SECONDS=60], clean"

deps:
	@./scripts/install-deps.sh

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/obj/src/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/bin/unit_tests: $(UNIT_OBJS) $(TEST_MAIN) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(LDLIBS) -o $@
$(BUILD)/bin/mpi_tests: $(MPI_OBJS) $(TEST_MAIN) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(LDLIBS) -o $@
# e2e tests start mpirun themselves, so they must not be MPI processes: plain gtest_main, no MPI_Init.
$(BUILD)/bin/e2e_tests: $(E2E_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ -lgtest_main $(GTEST_LIBS) $(LDLIBS) -o $@
$(BUILD)/bin/gpu_tests: $(GPU_OBJS) $(TEST_MAIN) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(LDLIBS) -o $@
# The cuDNN forward+backward floor for bench/run_h200.sh (CUDA builds only).
$(BUILD)/bin/cudnn_floor: $(BUILD)/obj/bench/cudnn_floor.o $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Everything bench/run_h200.sh runs on the GPU machine (build here with PORTABLE=1, carry $(BUILD)).
bench-gpu:
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN) $(BUILD)/bin/gpu_tests $(BUILD)/bin/cudnn_floor

# The test command of the README. Installs what is missing, builds, runs every suite, ends with "N passed, N failed".
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN) $(TEST_BINS) $(if $(filter 1,$(WITH_CUDA)),$(BUILD)/bin/gpu_tests,) \
	  $(if $(filter 1,$(HAVE_FUZZ)),$(FUZZ_BINS),)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/run-tests.sh $(BUILD)

# ---- fuzzing (tests/fuzz): libFuzzer targets built with clang, ASan and UBSan, in $(BUILD)/fuzz ----
# `make fuzz` runs each for FUZZ_SECONDS and fails on any crash; `make test` builds them (where clang and
# libclang_rt.fuzzer exist) and scripts/run-tests.sh runs them as the suite "fuzz".
FUZZ_SECONDS ?= 60
FUZZ_CXX  ?= $(firstword $(shell command -v clang++-14 clang++ 2>/dev/null))
HAVE_FUZZ := $(if $(FUZZ_CXX),$(if $(wildcard $(shell $(FUZZ_CXX) -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a),1,0),0)
FUZZ_DIR  := $(BUILD)/fuzz
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CXXFLAGS := -std=c++17 -O1 -g -Wall -Wextra $(FUZZ_SAN) -fsanitize=fuzzer-no-link
# Only what each target reaches: the .ts parser, the v1 validation with its HDF5 helpers, the NumPy readers.
FUZZ_TS_SRCS := tests/fuzz/fuzz_ts.cpp src/data/ts_import.cpp src/data/missing.cpp src/data/checks.cpp src/core/error.cpp
FUZZ_H5_SRCS := tests/fuzz/fuzz_h5.cpp src/data/format.cpp src/data/h5.cpp src/data/checks.cpp src/core/error.cpp \
                src/core/memory.cpp
# The .npy parser and the .npz importer (minizip reads the archive).
FUZZ_NPZ_SRCS := tests/fuzz/fuzz_npz.cpp src/data/npz_import.cpp src/data/npy.cpp src/data/missing.cpp src/data/checks.cpp \
                 src/data/class_labels.cpp src/core/error.cpp
FUZZ_BINS := $(FUZZ_DIR)/bin/fuzz_ts $(FUZZ_DIR)/bin/fuzz_h5 $(FUZZ_DIR)/bin/fuzz_npz

$(FUZZ_DIR)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CPPFLAGS) $(FUZZ_CXXFLAGS) -c $< -o $@
$(FUZZ_DIR)/bin/fuzz_ts: $(FUZZ_TS_SRCS:%.cpp=$(FUZZ_DIR)/obj/%.o)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(MPI_LIBS) -o $@
$(FUZZ_DIR)/bin/fuzz_h5: $(FUZZ_H5_SRCS:%.cpp=$(FUZZ_DIR)/obj/%.o)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer $^ -Wl,-rpath,$(HDF5_HOME)/lib -L$(HDF5_HOME)/lib -lhdf5 $(MPI_LIBS) -o $@

$(FUZZ_DIR)/bin/fuzz_npz: $(FUZZ_NPZ_SRCS:%.cpp=$(FUZZ_DIR)/obj/%.o)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(ZIP_LIBS) $(MPI_LIBS) -o $@

fuzz: deps
	@test "$(HAVE_FUZZ)" = 1 || { echo "make fuzz needs clang++ with libFuzzer (apt-get install clang libclang-rt-14-dev)"; exit 2; }
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZ_BINS)
	@./tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

test-gpu:
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN) $(BUILD)/bin/gpu_tests
	@./scripts/run-tests.sh $(BUILD) gpu

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN)
	@./scripts/demo.sh $(BUILD) $(NP)

# PNG figures of a run folder (train --out) or of a folder of bench JSON files: make plot RUN=runs/a
plot:
	@test -n "$(RUN)" || { echo "usage: make plot RUN=DIR   (a train --out folder or a folder of bench JSON files)"; exit 2; }
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN)
	@$(BIN) plot $(RUN)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
