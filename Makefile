# mmc: `make` builds ./mmc; `make demo` runs the main job; `make test` runs every test that
# needs no GPU (both first install what is missing), `make test-asan` the same under ASan and
# UBSan; `make generate` rewrites generated/ from graphs/ and templates/. See README.md.
CUDA    ?= /usr/local/cuda
LUA_INC ?= /usr/include/lua5.4
LUA_LIB ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
CC      ?= gcc
CFLAGS  ?= -O2 -g
# the project's own flags stay when CFLAGS or LDLIBS are given on the command line
override CFLAGS += -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP \
           -Icompiler -Iruntime -Itemplates -I$(LUA_INC) -I$(CUDA)/include
JANSSON ?= $(shell $(CC) -print-file-name=libjansson.a)
override LDLIBS += $(LUA_LIB) $(JANSSON) -lm -ldl -lpthread
# `make test-asan`: AddressSanitizer and UndefinedBehaviorSanitizer, any report fatal
ifneq ($(ASAN),)
override CFLAGS += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
OBJDIR  ?= build/obj
MMC     ?= mmc

MODULES ?= compiler runtime tokenizer
SRC     := $(filter-out compiler/main.c,$(wildcard $(addsuffix /*.c,$(MODULES))))
# Without the CUDA toolkit the compiler and the ref backend still build: runtime/no_cuda.c
# stands in for the cuda backend and NVRTC, which then say they are absent.
ifeq ($(wildcard $(CUDA)/include/cuda_runtime.h),)
override CFLAGS += -DMMC_NO_CUDA
SRC     := $(filter-out runtime/cuda_backend.c runtime/nvrtc_compile.c runtime/tensor_map.c,$(SRC))
else
override LDLIBS += -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lnvrtc -lcudart -lcublasLt
endif
OBJ     := $(patsubst %.c,$(OBJDIR)/%.o,$(SRC)) $(OBJDIR)/embedded.o
EMBED   := $(sort $(wildcard templates/*.cu templates/*.cuh templates/*.h graphs/policies/*.lua))
TESTS   := $(patsubst tests/%.c,build/tests/%,$(wildcard tests/test_*.c))
GPU_TESTS := $(patsubst tests/gpu/%.c,build/gpu/%,$(wildcard tests/gpu/test_*.c))

-include tokenizer/tokenizer.mk

.DEFAULT_GOAL := all
all: $(MMC)

$(MMC): $(OBJDIR)/compiler/main.o $(OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(OBJDIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

build/embed: tools/embed.c
	@mkdir -p build
	$(CC) -O1 -o $@ $<

# the set of embedded files, rewritten only when it changes: a template removed makes
# embedded.c again too (its timestamps alone would not)
EMBED_LIST := $(shell mkdir -p build; echo '$(EMBED)' | cmp -s - build/embed.list || echo '$(EMBED)' > build/embed.list; echo build/embed.list)

build/embedded.c: build/embed $(EMBED) $(EMBED_LIST)
	build/embed $(EMBED) > $@.tmp && mv $@.tmp $@

$(OBJDIR)/embedded.o: build/embedded.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

build/tests/%: tests/%.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  CC+LD  $@"
	@$(CC) $(CFLAGS) -Itests -o $@ $(filter %.c %.o,$^) $(LDLIBS)

build/gpu/%: tests/gpu/%.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  CC+LD  $@"
	@$(CC) $(CFLAGS) -Itests -o $@ $(filter %.c %.o,$^) $(LDLIBS)

generate: mmc
	./mmc compile graphs/minimind.lua -o generated/minimind --quiet

# the packages of tests/apt-packages.txt and tests/requirements.txt this machine lacks
deps:
	@bash tools/install_deps.sh

test: deps
	@$(MAKE) --no-print-directory mmc $(TESTS)
	bash tests/run.sh

# every test of `make test` with ./mmc and the test programs built under ASan+UBSan (objects in
# build/asan), then the plain ones again. Leaks are not reported: a plan lives as long as the
# process on purpose. CUDA's runtime needs the shadow gap left unprotected.
test-asan: deps
	@rm -f $(MMC) $(TESTS)
	@$(MAKE) --no-print-directory ASAN=1 OBJDIR=build/asan $(MMC) $(TESTS)
	ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash tests/run.sh; rc=$$?; rm -f $(MMC) $(TESTS); $(MAKE) --no-print-directory $(MMC) $(TESTS); exit $$rc

# the main job: the built-in corpus, training (GPU: MiniMind2-small; CPU: tiny), a plot, text
demo: deps
	@$(MAKE) --no-print-directory mmc
	bash tools/demo.sh

# on a machine with a GPU (see tests/gpu/run.sh)
gpu-tests: mmc $(GPU_TESTS)
test-gpu: gpu-tests
	bash tests/gpu/run.sh

# on a machine with a GPU and PyTorch: mmc beside PyTorch eager and torch.compile (bench/train_bench.py)
bench: mmc
	python3 bench/train_bench.py

clean:
	rm -rf build mmc

.PHONY: all deps demo generate test test-asan gpu-tests test-gpu bench clean
-include $(shell find build -name '*.d' 2>/dev/null)
