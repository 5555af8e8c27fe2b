# headlab: a small graph-based autodiff framework for training small transformers.
#
#   make            the library (build/libheadlab.a) and the example programs
#   make demo       installs missing packages, builds, runs the main example
#   make test       the layering check, the install test, the docs check (links, every
#                   program's flags on its page in docs/programs/, the listings of the
#                   programs' output in the docs rerun and compared), then the Check suite:
#                   float and double builds, 1 and 2 OpenMP threads on the CPU's best kernel
#                   set, then float at 1 thread on each other set it has (installs chromium
#                   for the report test)
#   make asan       the suite under AddressSanitizer + UndefinedBehaviorSanitizer (one pass
#                   per build, 1 thread; the double pass runs the library's suites)
#   make fuzz       libFuzzer on the file readers, the option parser, the vocabulary parser,
#                   the pretrained tokenizer readers (tokenizer.json, vocab.json +
#                   merges.txt), the patching pairs parser, the CSV reader and the
#                   token-file reader
#                   (tests/fuzz/), FUZZ_SECONDS per harness
#   make arm        cross-builds for AArch64 (Debian's gcc-aarch64-linux-gnu, arm64
#                   libraries by multiarch) and runs the float suite at 1 thread under
#                   qemu-user: every suite but those that start the programs
#   make bench      times headlab against OpenBLAS and PyTorch when installed (optional:
#                   apt-get install libopenblas0 python3-torch); a table and bench.csv.
#                   BENCH_ARGS=--quick for a smoke run, BENCH_ARGS=--help for the rest
#   make install    the library (libheadlab.a, libheadlab.so.0), its headers under
#                   include/headlab/, the programs and headlab.pc, into PREFIX (/usr/local);
#                   make uninstall removes them
#   make listings   reruns the programs' listings in the docs and writes their output back
#                   (tools/listings.sh; `make test` fails when one is out of date)
#   make kjv        out/kjv/kjv.txt: the King James Bible from Debian's bible-kjv, for charlm
#   make pystd      out/pystd/pystd.txt: the Python 3.11 standard library's modules as one text
#   make deps       installs missing Debian packages (apt-get; sudo when not root)
#   make clean
#
# Options: REAL=double (double-precision build, in build/double), NO_OMP=1 (no OpenMP),
#          MPI=1 (data-parallel training over Open MPI, compiled by mpicc, in build/mpi).

REAL   ?= float
PKGS   := libpng libcjson libpcre2-8 libutf8proc check

ifeq ($(MPI),1)
  CC        := mpicc
  MPIFLAG   := -DHL_MPI
  MPI_PKGS  := libopenmpi-dev openmpi-bin
  BUILD_TOP := build/mpi
else
  BUILD_TOP := build
endif

ifeq ($(REAL),double)
  BUILD    ?= $(BUILD_TOP)/double
  REALFLAG := -DHL_REAL_DOUBLE
else ifeq ($(REAL),float)
  BUILD    ?= $(BUILD_TOP)
  REALFLAG :=
else
  $(error REAL must be float or double, not '$(REAL)')
endif

# No -march: one build runs on any CPU of its target; the hot kernels are
# compiled once per instruction set below and chosen at run time (ops/isa.c).
OPT     ?= -O3
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
ifeq ($(NO_OMP),1)
  OMPFLAG := -Wno-unknown-pragmas
else
  OMPFLAG := -fopenmp
endif
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs libpng libcjson libpcre2-8 libutf8proc 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
# -ffp-contract=off: a*b+c is two roundings on every compiler (Clang would
# fuse it by default); the kernels ask for FMA where they mean it.
CFLAGS  += -std=c11 $(OPT) $(WARN) -ffp-contract=off $(OMPFLAG) $(REALFLAG) $(MPIFLAG) \
           -D_POSIX_C_SOURCE=200809L -I. -I$(BUILD)/include $(PKG_CFLAGS) $(SAN)
LDLIBS  := $(PKG_LIBS) -lm

# The library's folders, each building only on some before it (tools/check_layers.sh).
LIB_DIRS := core files text data ops cli models viz train io tasks gradcheck analysis report
# Headers of the library's own, not installed (see headlab.h).
INTERNAL_HEADERS := core/internal.h io/internal.h ops/internal.h ops/kernels.h ops/simd.h ops/gemm.h \
                    ops/tile_gemm.h ops/vmath.h text/vocab_impl.h text/hash.h \
                    text/pretrained_impl.h text/json.h text/lines.h gradcheck/case.h \
                    io/hf_names.h
# ops/ops.h includes every op's header through ops/op_headers.h, which is
# written into $(BUILD)/include/ from the headers ops/ holds (all but the
# internal ones and ops/isa.h), and rewritten only when that list changes: a
# new op's header needs no line anywhere.
OP_HEADERS     := $(sort $(filter-out ops/ops.h ops/isa.h $(INTERNAL_HEADERS),$(wildcard ops/*.h)))
OP_HEADER_LIST := $(BUILD)/include/ops/op_headers.h
# gradcheck/cases/ holds one file of gradient checks per op file; cases.c
# joins their tables, listed here as HL_GRADCHECK_FILES(X).
GRADCHECK_FILES := $(wildcard gradcheck/cases/*.c)
LIB_SRC  := $(wildcard $(LIB_DIRS:%=%/*.c)) $(GRADCHECK_FILES)
# The kernel sets (ops/kernels/, on ops/simd.h): every source compiled once
# per instruction set of the target, with that set's flags.
TARGET_CPU := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))
ifeq ($(TARGET_CPU),x86_64)
  ISAS := avx512 avx2 portable
else
  ISAS := portable
endif
# GCC 12 for AArch64 crashes (internal compiler error in vect_transform_reduction)
# vectorising fmax reductions over converted values, which tests and examples
# use; the loop vectoriser is off there. The kernels are written in vectors
# (ops/simd.h) and keep them.
ifeq ($(TARGET_CPU),aarch64)
  CFLAGS += -fno-tree-loop-vectorize
endif
ISA_FLAGS_avx512   := -mavx512f -mavx2 -mfma -DHL_SIMD_AVX512
ISA_FLAGS_avx2     := -mavx2 -mfma -DHL_SIMD_AVX2
ISA_FLAGS_portable := -DHL_SIMD_PORTABLE
KERNEL_SRC := $(wildcard ops/kernels/*.c)
KERNEL_OBJ := $(foreach i,$(ISAS),$(KERNEL_SRC:%.c=$(BUILD)/obj/%.$(i).o))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(KERNEL_OBJ)
LIB      := $(BUILD)/libheadlab.a
# A program is examples/NAME.c, or a folder examples/NAME/ of .c files.
PROGRAM_DIRS := $(notdir $(patsubst %/,%,$(wildcard examples/*/)))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/%,$(wildcard examples/*.c)) \
            $(PROGRAM_DIRS:%=$(BUILD)/%)
TEST_SRC := $(wildcard tests/*.c) tests/fuzz/fuzz_entry.c
TEST_BIN := $(BUILD)/test_headlab
# The suites: one per tests/test_<name>.c, which defines Suite *<name>_suite(void).
TEST_SUITE_NAMES := $(patsubst tests/test_%.c,%,$(wildcard tests/test_*.c))

.PHONY: FORCE all lib examples demo test test-one test-other-sets arm asan fuzz bench deps test-deps clean kjv pystd induction listings install uninstall shared
all: lib examples
lib: $(LIB)
examples: $(EXAMPLES) $(BUILD)/bench

$(OP_HEADER_LIST): FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '/* Written by the Makefile: every op header of ops/ (see ops/ops.h). */' \
	    $(foreach h,$(OP_HEADERS),'#include "$(h)"') >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
FORCE:

$(BUILD)/obj/%.o: %.c $(wildcard $(LIB_DIRS:%=%/*.h)) headlab.h $(OP_HEADER_LIST)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

define kernel_isa
$(BUILD)/obj/ops/kernels/%.$(1).o: ops/kernels/%.c $(wildcard ops/*.h ops/kernels/*.h core/*.h) \
    $(OP_HEADER_LIST)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $(ISA_FLAGS_$(1)) -MMD -MP -c $$< -o $$@
endef
$(foreach i,$(ISAS),$(eval $(call kernel_isa,$(i))))

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%: examples/%.c $(LIB)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

define program_dir
$(BUILD)/$(1): $(wildcard examples/$(1)/*.c examples/$(1)/*.h) $(LIB)
	$$(CC) $$(CFLAGS) $(wildcard examples/$(1)/*.c) $(LIB) $$(LDLIBS) -o $$@
endef
$(foreach p,$(PROGRAM_DIRS),$(eval $(call program_dir,$(p))))

# The benchmark program (bench/): OpenBLAS is dlopen'ed at run time, hence -ldl.
BENCH_SRC := $(wildcard bench/*.c)
$(BUILD)/bench: $(BENCH_SRC) $(wildcard bench/*.h) $(LIB)
	$(CC) $(CFLAGS) $(BENCH_SRC) $(LIB) $(LDLIBS) -ldl -o $@

# ---- The installed library: the same objects compiled position-independent
# for libheadlab.so (build/pic/), the public headers (all but the internal
# ones, see headlab.h), the programs and a pkg-config file.
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
VERSION    := 0.1.0
SOVERSION  := 0
PIC_OBJ    := $(LIB_OBJ:$(BUILD)/obj/%=$(BUILD)/pic/%)
SHARED     := $(BUILD)/libheadlab.so.$(VERSION)
PUBLIC_HEADERS := headlab.h $(filter-out $(INTERNAL_HEADERS),$(wildcard $(LIB_DIRS:%=%/*.h)))
PROGRAMS   := $(notdir $(EXAMPLES))

$(BUILD)/obj/gradcheck/cases.o $(BUILD)/pic/gradcheck/cases.o: $(GRADCHECK_FILES)
$(BUILD)/obj/gradcheck/cases.o $(BUILD)/pic/gradcheck/cases.o: CFLAGS += \
    -D'HL_GRADCHECK_FILES(X)=$(foreach f,$(GRADCHECK_FILES:gradcheck/cases/%.c=%),X($(f)))'

$(BUILD)/pic/%.o: %.c $(wildcard $(LIB_DIRS:%=%/*.h)) headlab.h $(OP_HEADER_LIST)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

define kernel_isa_pic
$(BUILD)/pic/ops/kernels/%.$(1).o: ops/kernels/%.c $(wildcard ops/*.h ops/kernels/*.h core/*.h) \
    $(OP_HEADER_LIST)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -fPIC $(ISA_FLAGS_$(1)) -MMD -MP -c $$< -o $$@
endef
$(foreach i,$(ISAS),$(eval $(call kernel_isa_pic,$(i))))

$(SHARED): $(PIC_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libheadlab.so.$(SOVERSION) $^ $(LDLIBS) -o $@
shared: $(SHARED)

install: $(LIB) $(SHARED) $(EXAMPLES)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/headlab $(DESTDIR)$(BINDIR)
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libheadlab.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libheadlab.so.$(SOVERSION)
	ln -sf libheadlab.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libheadlab.so
	for h in $(PUBLIC_HEADERS); do install -D -m 644 $$h $(DESTDIR)$(INCLUDEDIR)/headlab/$$h || exit 1; done
	install -m 644 $(OP_HEADER_LIST) $(DESTDIR)$(INCLUDEDIR)/headlab/ops/
	install -m 755 $(EXAMPLES) $(DESTDIR)$(BINDIR)/
	printf '%s\n' '# headlab is under the MIT licence (LICENSE in its source).' \
	    'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	    'Name: headlab' \
	    'Description: graph-based autodiff for training small transformers and studying attention heads' \
	    'Version: $(VERSION)' 'Requires.private: libpng libcjson libpcre2-8 libutf8proc' \
	    'Cflags: -I$${includedir}/headlab $(REALFLAG)' \
	    'Libs: -L$${libdir} -lheadlab' 'Libs.private: $(OMPFLAG) -lm' \
	    >$(DESTDIR)$(LIBDIR)/pkgconfig/headlab.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libheadlab.a $(DESTDIR)$(LIBDIR)/libheadlab.so \
	    $(DESTDIR)$(LIBDIR)/libheadlab.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libheadlab.so.$(VERSION) \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/headlab.pc $(PROGRAMS:%=$(DESTDIR)$(BINDIR)/%)
	rm -rf $(DESTDIR)$(INCLUDEDIR)/headlab

# The examples suite runs the programs of the same build.
$(TEST_BIN): $(TEST_SRC) $(wildcard tests/*.h tests/fuzz/*.h) $(LIB) $(EXAMPLES)
	$(CC) $(CFLAGS) -DHL_BUILD_DIR='"$(BUILD)"' \
	    -D'HL_TEST_SUITES(X)=$(foreach s,$(TEST_SUITE_NAMES),X($(s)))' \
	    $(TEST_SRC) $(LIB) $(CHECK_LIBS) $(LDLIBS) -o $@

# The docs' listings of program output, rerun and written back.
listings: examples
	@tools/listings.sh $(BUILD)

# The King James Bible as plain text (Debian's bible-kjv), for charlm.
kjv:
	@tools/kjv.sh

# Python source code as a second real text (Debian's libpython3.11-stdlib).
pystd:
	@tools/pystd.sh

# An induction head on real text: the recipe of the induction study trained on
# the King James Bible and on the Python standard library, each with its
# phase-change table and causal numbers (tools/induction.sh; out/induction/).
induction: deps
	@$(MAKE) --no-print-directory $(BUILD)/charlm $(BUILD)/heads
	@BUILD=$(BUILD) TEXT=kjv tools/induction.sh
	@BUILD=$(BUILD) TEXT=pystd tools/induction.sh

deps:
	@tools/deps.sh $(MPI_PKGS)

# The head report's test opens it in headless Chromium (Debian's chromium package).
test-deps:
	@tools/deps.sh chromium $(MPI_PKGS)

# The main job: build every program, train the toy model of docs/toy-task.md
# and draw its heads.
demo: deps
	@$(MAKE) --no-print-directory examples
	$(BUILD)/toy_heads --out out/toy_heads

# Runs one build's suite once per thread count in TEST_THREADS (used by test
# and asan); TEST_SUITES names some suites (default: all). Check's per-test
# timeouts only catch a hang: TEST_TIMEOUT_SCALE multiplies them (Check's
# CK_TIMEOUT_MULTIPLIER), so that a slower or busy machine passes too.
TEST_THREADS ?= 1 2
TEST_SUITES ?=
TEST_TIMEOUT_SCALE ?= 4
test-one: $(TEST_BIN)
	@for t in $(TEST_THREADS); do echo "OMP_NUM_THREADS=$$t $(TEST_BIN) $(TEST_SUITES)"; \
	    CK_TIMEOUT_MULTIPLIER=$(TEST_TIMEOUT_SCALE) OMP_NUM_THREADS=$$t $(TEST_BIN) \
	    $(TEST_SUITES) || exit 1; done

# The suites that start the example programs, and the rest (the library's).
PROGRAM_SUITES := examples faults heads heads_patch heads_pretrained gradcheck_tool head_report \
                  dist tokens
LIBRARY_SUITES := $(filter-out $(PROGRAM_SUITES),$(TEST_SUITE_NAMES))

# The suite again on each other kernel set the CPU has (HL_ISA), float at 1
# thread: the best set ran both builds at 1 and 2 threads already.
test-other-sets: $(TEST_BIN)
	@for isa in $$($(TEST_BIN) --other-kernel-sets); do \
	    echo "HL_ISA=$$isa OMP_NUM_THREADS=1 $(TEST_BIN)"; \
	    CK_TIMEOUT_MULTIPLIER=$(TEST_TIMEOUT_SCALE) HL_ISA=$$isa OMP_NUM_THREADS=1 $(TEST_BIN) || exit 1; done

test: test-deps
	@$(MAKE) --no-print-directory lib
	@tools/check_layers.sh $(BUILD)/obj
ifeq ($(MPI),1)
	@$(MAKE) --no-print-directory test-one REAL=float MPI=1
else
	@tests/install.sh
	@$(MAKE) --no-print-directory examples $(BUILD)/bench
	@tests/check_docs.sh $(BUILD)
	@$(MAKE) --no-print-directory test-one REAL=float
	@$(MAKE) --no-print-directory test-one REAL=double
	@$(MAKE) --no-print-directory test-other-sets REAL=float
endif

# AArch64 under qemu-user. Without binfmt_misc (containers, CI) an AArch64
# program cannot start another, so the suites that run the programs are left
# out; they run natively on x86-64.
ARM_PKGS := gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libpng-dev:arm64 \
            libcjson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 check:arm64
arm:
	@tools/deps.sh $(ARM_PKGS)
	@PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
	    $(MAKE) --no-print-directory CC=aarch64-linux-gnu-gcc BUILD=build/arm64 \
	    build/arm64/test_headlab
	CK_TIMEOUT_MULTIPLIER=20 OMP_NUM_THREADS=1 qemu-aarch64 -L / build/arm64/test_headlab $(LIBRARY_SUITES)

# OpenBLAS is loaded at run time and PyTorch runs in bench/torch_worker.py: neither is
# needed to build, and a missing one only empties its columns.
bench: deps
	@$(MAKE) --no-print-directory $(BUILD)/bench
	$(BUILD)/bench $(BENCH_ARGS)
	@if command -v mpirun >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory MPI=1 build/mpi/toy_heads && bench/mpi_row.sh build/mpi; \
	else bench/mpi_row.sh build/mpi; fi

SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# One pass per build under the sanitizers: the thread-identity tests run 1 and
# 2 threads inside the suite. The float pass runs every suite (~20 minutes on 2
# cores); the double pass the library's, since the programs run the same code
# in either precision and the float pass has run them.
asan: test-deps
	@$(MAKE) --no-print-directory test-one REAL=float BUILD=build/asan OPT="-O1 -g" \
	    SAN="$(SAN_FLAGS)" TEST_THREADS=1 TEST_TIMEOUT_SCALE=20
	@$(MAKE) --no-print-directory test-one REAL=double BUILD=build/asan-double OPT="-O1 -g" \
	    SAN="$(SAN_FLAGS)" TEST_THREADS=1 TEST_SUITES="$(LIBRARY_SUITES)" TEST_TIMEOUT_SCALE=20

# libFuzzer (Debian's clang 14 and its runtime, libclang-rt-14-dev): one program
# per harness of tests/fuzz/, each run FUZZ_SECONDS (default 60) from the seed
# corpus; crashes land in build/fuzz/crashes/<harness>/ (tools/fuzz.sh).
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES := safetensors checkpoint gpt cli patch_pairs vocab csv token_file token_ids \
                  tokenizer_json vocab_merges hf_config hf_index
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_PROGS := $(FUZZ_HARNESSES:%=build/fuzz/fuzz_%)
fuzz:
	@tools/deps.sh clang libclang-rt-14-dev
	@$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz NO_OMP=1 OPT="-O1 -g" \
	    SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FUZZ_PROGS)
	tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

build/fuzz/fuzz_%: tests/fuzz/fuzz_main.c tests/fuzz/fuzz_entry.c tests/fuzz/fuzz_entry.h $(LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -DHL_FUZZ_TARGET=hl_fuzz_$* tests/fuzz/fuzz_main.c \
	    tests/fuzz/fuzz_entry.c $(LIB) $(LDLIBS) -o $@

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(PIC_OBJ:.o=.d)
