# mmc: `make` builds ./mmc; `make demo` runs the main job; `make test` runs every test that
# needs no GPU (both first install what is missing); `make generate` rewrites generated/ from
# graphs/ and templates/. See README.md.
CUDA    ?= /usr/local/cuda
LUA_INC ?= /usr/include/lua5.4
LUA_LIB ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
CC      ?= gcc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP \
           -Icompiler -Iruntime -Itemplates -I$(LUA_INC) -I$(CUDA)/include
JANSSON ?= $(shell $(CC) -print-file-name=libjansson.a)
LDLIBS  += $(LUA_LIB) $(JANSSON) -lm -ldl -lpthread
OBJDIR  ?= build/obj
MMC     ?= mmc

MODULES ?= compiler runtime tokenizer
SRC     := $(filter-out compiler/main.c,$(wildcard $(addsuffix /*.c,$(MODULES))))
# Without the CUDA toolkit the compiler and the ref backend still build: runtime/no_cuda.c
# stands in for the cuda backend and NVRTC, which then say they are absent.
ifeq ($(wildcard $(CUDA)/include/cuda_runtime.h),)
CFLAGS  += -DMMC_NO_CUDA
SRC     := $(filter-out runtime/cuda_backend.c runtime/nvrtc_compile.c,$(SRC))
else
LDLIBS  += -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lnvrtc -lcudart -lcublasLt
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

build/embedded.c: build/embed $(EMBED)
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

.PHONY: all deps demo generate test gpu-tests test-gpu bench clean
-include $(shell find build -name '*.d' 2>/dev/null)
