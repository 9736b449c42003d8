# ragtrain — build, test, install and demo. The libraries are found as cluster modules provide them: MPI through its
# wrapper compiler (mpicc --showme) or pkg-config, parallel HDF5 through pkg-config (hdf5-openmpi, hdf5) or h5pcc;
# a path given wins: make MPI_HOME=/opt/ompi HDF5_HOME=/opt/hdf5 CUDA_HOME=/opt/cuda (`make show-config` prints
# what was found). Useful switches: DEBUG=1 (no optimisation), SANITIZE=address,undefined, PORTABLE=1 (static HDF5
# + Boost.PO, for running the binary on machines that lack them, such as the GPU machine), NP=2 (ranks for `make
# demo`). `make install PREFIX=/opt/ragtrain` (DESTDIR= for staging): bin/, share/ragtrain/, share/doc/ragtrain/.

CUDA_HOME  ?= /usr/local/cuda
CUDNN_HOME ?= $(CUDA_HOME)
NCCL_HOME  ?= $(CUDA_HOME)
CUDA_ARCH  ?= sm_90
CXX        := g++
NVCC       := $(CUDA_HOME)/bin/nvcc
# The C wrapper, not mpicxx: ragtrain calls MPI's C API only (OMPI_SKIP_MPICXX), and mpicxx --showme:link adds
# Open MPI's deprecated C++ bindings library, which Open MPI 5 no longer has.
MPICC      ?= mpicc
H5PCC      ?= h5pcc
PKG_CONFIG ?= pkg-config
# A sanitizer build goes to its own folder, so that `make test SANITIZE=address,undefined` never mixes objects.
BUILD     ?= $(if $(SANITIZE),build-san,build)
NP        ?= 2
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
# The toolchain's multiarch folder name (aarch64-linux-gnu on GH200 nodes, its x86 twin elsewhere), for the places
# Debian and Ubuntu put headers and static libraries; empty elsewhere.
MULTIARCH := $(shell $(CXX) -print-multiarch 2>/dev/null)

# `make` alone builds the binary: rules for generated files come before `all` below.
.DEFAULT_GOAL := all

# ---- where MPI and parallel HDF5 are: *_HOME if given (also from the environment), else the tools ----
# A prefix's libraries are in lib/ or lib64/: wherever the library is.
lib_dir_of = $(patsubst %/$(2),%,$(firstword $(wildcard $(1)/lib/$(2) $(1)/lib64/$(2)) $(1)/lib/$(2)))
ifneq ($(MPI_HOME),)
MPI_FROM   := MPI_HOME
MPI_CFLAGS := -I$(MPI_HOME)/include
MPI_LIBS   := -L$(call lib_dir_of,$(MPI_HOME),libmpi.so) -lmpi
else ifneq ($(shell $(MPICC) --showme:version 2>/dev/null),)
MPI_FROM   := $(MPICC) --showme
MPI_CFLAGS := $(shell $(MPICC) --showme:compile)
MPI_LIBS   := $(shell $(MPICC) --showme:link)
else
MPI_FROM   := $(PKG_CONFIG) ompi-c
MPI_CFLAGS := $(shell $(PKG_CONFIG) --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell $(PKG_CONFIG) --libs ompi-c 2>/dev/null)
endif
# Debian's parallel HDF5 is hdf5-openmpi (hdf5 may be the serial one); a module's parallel build is usually hdf5.
HDF5_PC := $(firstword $(foreach p,hdf5-openmpi hdf5-mpi hdf5,$(if $(shell $(PKG_CONFIG) --exists $(p) 2>/dev/null && echo y),$(p))))
ifneq ($(HDF5_HOME),)
HDF5_FROM    := HDF5_HOME
HDF5_CFLAGS  := -I$(or $(HDF5_INC),$(HDF5_HOME)/include)
HDF5_LDFLAGS := -L$(call lib_dir_of,$(HDF5_HOME),libhdf5.so)
else ifneq ($(HDF5_PC),)
HDF5_FROM    := $(PKG_CONFIG) $(HDF5_PC)
HDF5_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(HDF5_PC))
HDF5_LDFLAGS := $(shell $(PKG_CONFIG) --libs-only-L $(HDF5_PC))
else
HDF5_SHOW    := $(shell $(H5PCC) -show 2>/dev/null)
HDF5_FROM    := $(H5PCC) -show
HDF5_CFLAGS  := $(filter -I%,$(HDF5_SHOW))
HDF5_LDFLAGS := $(filter -L%,$(HDF5_SHOW)) $(patsubst %/,-L%,$(dir $(filter %/libhdf5.a %/libhdf5.so,$(HDF5_SHOW))))
endif
dirs_of = $(patsubst $(1)%,%,$(filter $(1)%,$(2)))
MPI_INC_DIRS  := $(call dirs_of,-I,$(MPI_CFLAGS))
MPI_LIB_DIRS  := $(call dirs_of,-L,$(MPI_LIBS))
HDF5_INC_DIRS := $(call dirs_of,-I,$(HDF5_CFLAGS))
HDF5_LIB_DIRS := $(call dirs_of,-L,$(HDF5_LDFLAGS))

# ---- detection (each test can fail: it looks for the real header or library) ----
have = $(if $(wildcard $(1)),1,0)
HAVE_MPI   := $(call have,$(addsuffix /mpi.h,$(MPI_INC_DIRS) /usr/include))
# Parallel, not only HDF5: the build's own configuration header says whether it was built with MPI.
HAVE_HDF5  := $(if $(shell grep -ls '^\#define H5_HAVE_PARALLEL 1' $(addsuffix /H5pubconf.h,$(HDF5_INC_DIRS)) 2>/dev/null),1,0)
HAVE_BOOST := $(if $(wildcard /usr/include/boost/program_options.hpp $(BOOST_HOME)/include/boost/program_options.hpp),1,0)
HAVE_GTEST := $(call have,/usr/include/gtest/gtest.h)
HAVE_MINIZIP := $(call have,/usr/include/minizip/unzip.h)
HAVE_NVCC  := $(call have,$(NVCC))
HAVE_CUDNN := $(if $(wildcard $(CUDNN_HOME)/include/cudnn.h /usr/include/cudnn.h $(if $(MULTIARCH),/usr/include/$(MULTIARCH)/cudnn.h)),1,0)
HAVE_NCCL  := $(if $(wildcard $(NCCL_HOME)/include/nccl.h /usr/include/nccl.h),1,0)
WITH_CUDA  ?= $(if $(and $(filter 111,$(HAVE_NVCC)$(HAVE_CUDNN)$(HAVE_NCCL)),$(wildcard src/backend/cuda)),1,0)

mark = $(if $(filter 1,$(1)),✓,✗)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean help deps show-config,$(MAKECMDGOALS)),)
$(info ragtrain build: $(call mark,$(HAVE_MPI)) Open MPI  $(call mark,$(HAVE_HDF5)) parallel HDF5  $(call mark,$(HAVE_BOOST)) Boost.PO  $(call mark,$(HAVE_GTEST)) GoogleTest  $(call mark,$(HAVE_MINIZIP)) minizip  $(call mark,$(HAVE_NVCC)) CUDA  $(call mark,$(HAVE_CUDNN)) cuDNN  $(call mark,$(HAVE_NCCL)) NCCL  -> $(if $(filter 1,$(WITH_CUDA)),CPU + CUDA backends,CPU backend only)  [MPI: $(MPI_FROM), HDF5: $(HDF5_FROM)])
endif
endif

# ---- flags ----
OPT := $(if $(filter 1,$(DEBUG)),-O0,-O2)
SAN := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
CPPFLAGS := -Iinclude $(HDF5_CFLAGS) $(MPI_CFLAGS) $(if $(BOOST_HOME),-I$(BOOST_HOME)/include) -DOMPI_SKIP_MPICXX=1 -MMD -MP
CXXFLAGS = -std=c++17 $(OPT) -g -Wall -Wextra -Wpedantic -Wshadow $(SAN)
# The tests' own code (assertions, fixtures, small loops; what they test is the library, built with OPT) builds
# about 45% faster unoptimised (tests/unit/test_tracking.cpp: 10.4 s against 18.6 s at -O2), and most of the
# build that `make test` waits for is test code. TEST_OPT=-O2 builds it as the library.
TEST_OPT ?= -O0
$(BUILD)/obj/tests/%.o: OPT = $(TEST_OPT)
# The static HDF5 of PORTABLE=1: in HDF5's own library folder, or Debian's flavour-named copy.
HDF5_STATIC := $(firstword $(wildcard $(addsuffix /libhdf5.a,$(HDF5_LIB_DIRS)) $(if $(MULTIARCH),/usr/lib/$(MULTIARCH)/libhdf5_openmpi.a)))
ifeq ($(PORTABLE),1)
HDF5_LIBS  := $(HDF5_STATIC) -lsz -laec -lz -ldl -lm
BOOST_LIBS := -Wl,-Bstatic -lboost_program_options -Wl,-Bdynamic
# minizip reads .npz archives (src/data/npz_import.cpp says why); static, as the GPU machine lacks it.
ZIP_LIBS   := -Wl,-Bstatic -lminizip -Wl,-Bdynamic -lz
else
HDF5_LIBS  := $(HDF5_LDFLAGS) -lhdf5
BOOST_LIBS := -lboost_program_options
ZIP_LIBS   := -lminizip -lz
endif
BOOST_LIBS := $(if $(BOOST_HOME),-L$(BOOST_HOME)/lib) $(BOOST_LIBS)
LDLIBS := $(HDF5_LIBS) $(BOOST_LIBS) $(ZIP_LIBS) $(MPI_LIBS) -lpthread
# The library folders that were found are also where the binary looks at run time, so it runs (installed, too)
# without the module that provided them loaded.
RPATH := $(foreach d,$(sort $(HDF5_LIB_DIRS) $(MPI_LIB_DIRS) $(if $(BOOST_HOME),$(BOOST_HOME)/lib)),-Wl,-rpath,$(d))
LDFLAGS := $(SAN) $(RPATH)

ifeq ($(WITH_CUDA),1)
CUDA_INCS := $(addprefix -I,$(sort $(CUDA_HOME)/include $(CUDNN_HOME)/include $(NCCL_HOME)/include))
CPPFLAGS  += -DRAGTRAIN_WITH_CUDA=1 $(CUDA_INCS)
# nvcc takes the include folders and macros of the MPI and HDF5 flags, not their other compiler options.
NVCCFLAGS := -std=c++17 -O3 -arch=$(CUDA_ARCH) -Iinclude $(CUDA_INCS) $(filter -I% -D%,$(MPI_CFLAGS) $(HDF5_CFLAGS)) \
             -DOMPI_SKIP_MPICXX=1 -DRAGTRAIN_WITH_CUDA=1 -MMD -MP -Xcompiler -Wall
LDLIBS    += $(addprefix -L,$(sort $(wildcard $(CUDA_HOME)/lib64 $(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib $(NCCL_HOME)/lib64 $(NCCL_HOME)/lib))) \
             -lcudnn -lnccl -lcudart_static -lrt -ldl
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

.PHONY: all deps test test-gpu bench-gpu demo plot clean help fuzz install uninstall show-config FORCE
all: $(BIN)

help:
	@sed -n '1,6p' Makefile
	@echo "targets: all (default), deps, test, test-gpu, bench-gpu, demo, plot RUN=DIR, fuzz [FUZZ_SECONDS=60],"
	@echo "         install [PREFIX=/usr/local] [DESTDIR=], uninstall (the same settings), show-config, clean"

# Where each library was found and the flags it gave: the first thing to look at when a cluster build fails.
show-config:
	@echo "MULTIARCH     = $(MULTIARCH)"
	@echo "MPI           : $(call mark,$(HAVE_MPI)) from $(MPI_FROM)"
	@echo "MPI_CFLAGS    = $(MPI_CFLAGS)"
	@echo "MPI_LIBS      = $(MPI_LIBS)"
	@echo "parallel HDF5 : $(call mark,$(HAVE_HDF5)) from $(HDF5_FROM)"
	@echo "HDF5_CFLAGS   = $(HDF5_CFLAGS)"
	@echo "HDF5_LIBS     = $(HDF5_LIBS)"
	@echo "CUDA          : $(if $(filter 1,$(WITH_CUDA)),built with CUDA_HOME=$(CUDA_HOME) CUDNN_HOME=$(CUDNN_HOME) NCCL_HOME=$(NCCL_HOME),not built (CUDA_HOME=$(CUDA_HOME): nvcc $(call mark,$(HAVE_NVCC)) cuDNN $(call mark,$(HAVE_CUDNN)) NCCL $(call mark,$(HAVE_NCCL))))"
	@echo "LDFLAGS       = $(LDFLAGS)"

# ---- install: the conventional layout, so that a module file only has to add PREFIX/bin to PATH ----
#   PREFIX/bin/ragtrain
#   PREFIX/share/ragtrain/{jobs,inputs,tools}   the job scripts (defaulting to this ragtrain), recipes and data, tools
#   PREFIX/share/doc/ragtrain/                 README.md, LICENSE, doc/
# DESTDIR stages the same tree under another root (packaging); the paths written into the job scripts stay PREFIX's.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/ragtrain
DOCDIR  ?= $(PREFIX)/share/doc/ragtrain
install: $(BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/jobs $(DESTDIR)$(DATADIR)/tools $(DESTDIR)$(DOCDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/ragtrain
	for f in jobs/*; do \
	  sed 's|^RAGTRAIN=$${RAGTRAIN:-build/bin/ragtrain}|RAGTRAIN=$${RAGTRAIN:-$(BINDIR)/ragtrain}|' $$f > $(DESTDIR)$(DATADIR)/$$f && \
	  chmod 755 $(DESTDIR)$(DATADIR)/$$f || exit 1; \
	done
	install -m 755 tools/*.py $(DESTDIR)$(DATADIR)/tools/
	rm -rf $(DESTDIR)$(DATADIR)/inputs $(DESTDIR)$(DOCDIR)/doc
	cp -R inputs $(DESTDIR)$(DATADIR)/inputs
	cp -R doc $(DESTDIR)$(DOCDIR)/doc
	install -m 644 README.md LICENSE $(DESTDIR)$(DOCDIR)/
	@echo "installed ragtrain in $(DESTDIR)$(PREFIX): bin/ragtrain, share/ragtrain/{jobs,inputs,tools}, share/doc/ragtrain"
# What install wrote, and nothing else: the binary and ragtrain's own two folders under share/.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ragtrain
	rm -rf $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR)

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
# The cuDNN forward+backward floor for bench/run_fused.sh and bench/run_h200.sh (CUDA builds only).
$(BUILD)/bin/cudnn_floor: $(BUILD)/obj/bench/cudnn_floor.o $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(LDLIBS) -o $@

# tests/build/test_build.sh builds this against MPI and parallel HDF5 reached only through a relocated prefix: the
# translation units of the data path's parallel reads (MPI-IO open, header validation, collective hyperslab reads)
# and a main that runs them on every rank; small, so that the suite stays fast without ccache.
RELOC_SRCS := tests/build/reloc_probe.cpp src/data/format.cpp src/data/stored_statistics.cpp src/data/shard.cpp src/data/direct_read.cpp \
              src/data/parallel_blocks.cpp src/data/h5.cpp src/data/checks.cpp src/core/error.cpp src/core/memory.cpp
$(BUILD)/bin/reloc_probe: $(RELOC_SRCS:%.cpp=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $^ $(HDF5_LIBS) $(MPI_LIBS) -o $@

# Everything bench/run_fused.sh and bench/run_h200.sh run on the GPU machine (build here with PORTABLE=1, carry $(BUILD)).
bench-gpu:
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN) $(BUILD)/bin/gpu_tests $(BUILD)/bin/cudnn_floor

# The test command of the README. Installs what is missing, builds, runs every suite, ends with "N passed, N failed".
# The NVTX injection library of the e2e test Tracking.CudaBuildsMarkThePhasesWithNvtx (NVTX3 is in the toolkit).
NVTX_COUNT := $(BUILD)/lib/libnvtx_count.so
$(NVTX_COUNT): tests/nvtx/nvtx_count.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -fPIC -shared -Wall -Wextra -I$(CUDA_HOME)/include $< -o $@

test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BIN) $(TEST_BINS) $(if $(filter 1,$(WITH_CUDA)),$(BUILD)/bin/gpu_tests $(NVTX_COUNT),) \
	  $(if $(filter 1,$(HAVE_FUZZ)),$(FUZZ_BINS),)
	@FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) ./scripts/run-tests.sh $(BUILD)

# ---- fuzzing (tests/fuzz): libFuzzer targets built with clang, ASan and UBSan, in $(BUILD)/fuzz ----
# `make fuzz` runs each for FUZZ_SECONDS and fails on any crash; `make test` builds them (where clang and
# libclang_rt.fuzzer exist) and scripts/run-tests.sh runs them as the suite "fuzz".
FUZZ_SECONDS ?= 60
# `make test` gives each target a shorter run (the corpus replays first, then new inputs): CI keeps its time.
TEST_FUZZ_SECONDS ?= 20
FUZZ_CXX  ?= $(firstword $(shell command -v clang++-14 clang++ 2>/dev/null))
# libFuzzer's runtime is named after the target's architecture (as aarch64 on GH200 nodes): asked of clang.
FUZZ_ARCH := $(if $(FUZZ_CXX),$(firstword $(subst -, ,$(shell $(FUZZ_CXX) -dumpmachine 2>/dev/null))))
HAVE_FUZZ := $(if $(FUZZ_CXX),$(if $(wildcard $(shell $(FUZZ_CXX) -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-$(FUZZ_ARCH).a),1,0),0)
FUZZ_DIR  := $(BUILD)/fuzz
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CXXFLAGS := -std=c++17 -O1 -g -Wall -Wextra $(FUZZ_SAN) -fsanitize=fuzzer-no-link
# Only what each target reaches: the .ts parser, the v1 validation with its HDF5 helpers, the NumPy readers.
FUZZ_TS_SRCS := tests/fuzz/fuzz_ts.cpp src/data/ts_import.cpp src/data/names.cpp src/data/missing.cpp src/data/checks.cpp src/core/error.cpp
FUZZ_H5_SRCS := tests/fuzz/fuzz_h5.cpp src/data/format.cpp src/data/h5.cpp src/data/checks.cpp src/core/error.cpp \
                src/core/memory.cpp src/data/stored_statistics.cpp
# The .npy parser and the .npz importer (minizip reads the archive).
FUZZ_NPZ_SRCS := tests/fuzz/fuzz_npz.cpp src/data/npz_import.cpp src/data/names.cpp src/data/npy.cpp src/data/missing.cpp src/data/checks.cpp \
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
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(RPATH) $(HDF5_LDFLAGS) -lhdf5 $(MPI_LIBS) -o $@

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
