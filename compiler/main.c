/* main: the mmc command line. Each subcommand lives with its module; this file only
 * dispatches and prints usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    {"compile", cmd_compile, "compile GRAPH.lua [-o DIR] [--policy NAME|FILE] [-D key=value]... [-I DIR]... [--lua-memory MiB] [--lua-steps N] [--dump PASS] [--no-fusion] [--no-merge] [--no-dw-add] [--no-remat] [--remat-gemm-inputs] [--forward] [--reference-kernels[=KINDS]] [--quiet]"},
    {"check-kernels", cmd_check_kernels, "check-kernels DIR|FILE.cu [--arch sm_90]...   compile DIR/kernels.cu (the plan's own) or a .cu file with NVRTC"},
    {"train", cmd_train, "train PLAN_DIR --data FILE [--backend ref|cuda] [--steps N] [--out DIR [--force]] [--resume DIR] ..."},
    {"tokens", cmd_tokens, "tokens FILE          describe a token file (header, counts)"},
    {"init", cmd_init, "init PLAN_DIR -o RUN_DIR [--seed N]   a run folder with initial weights"},
    {"export", cmd_export, "export RUN_DIR [--dtype f16] -o OUT.safetensors | --format hf [--tokenizer FILE] -o DIR"},
    {"step", cmd_step, "step PLAN_DIR --data FILE --init W.safetensors [--backend ref|cuda] -o GRADS.safetensors"},
    {"bench", cmd_bench, "bench PLAN_DIR [--steps N] [--warmup N] [--profile] [--json FILE]   the step's speed on the GPU"},
    {"tokenizer", cmd_tokenizer, "tokenizer train|encode|decode|bench ...   byte-level BPE tokenizers (tokenizer.json)"},
    {"eval", cmd_eval, "eval RUN_DIR|PLAN_DIR [--init RUN_DIR|W.safetensors] --data FILE [--batches N]   mean loss and perplexity"},
    {"generate", cmd_generate, "generate RUN_DIR|W.safetensors --prompt TEXT|--chat TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--greedy]   text from a model"},
    {"compare", cmd_compare, "compare GRAPH.lua --policies fp32,amp_fp16,fp32:100+amp_fp16,... --data FILE --val FILE --steps N --out DIR [--backend ref|cuda]   one run per policy, a table, a plot"},
    {"plot", cmd_plot, "plot RUN_DIR... [-o OUT.png]   loss, lr, loss scale and grad norm of runs, overlaid (gnuplot)"},
    {"data", cmd_data, "data [--sft] CORPUS.jsonl --tokenizer FILE --seq 512 -o train.bin [--val F] [--pack]   jsonl -> token files (--sft: conversations, with a loss mask)"},
};

static void usage(FILE *f) {
    fprintf(f, "mmc: a model-graph compiler with generated kernels\nusage:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  mmc %s\n", commands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    size_t n = sizeof commands / sizeof commands[0];
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: mmc %s\n(the README's section on it has every option)\n", commands[i].usage);
            return 0;
        }
        return commands[i].run(argc - 1, argv + 1);
    }
    const char *names[sizeof commands / sizeof commands[0] + 1] = {0};
    for (size_t i = 0; i < n; i++) names[i] = commands[i].name;
    const char *near = nearest_word(argv[1], names);
    if (near) fprintf(stderr, "mmc: unknown command '%s'; did you mean '%s'?\n", argv[1], near);
    else {
        fprintf(stderr, "mmc: unknown command '%s'\n", argv[1]);
        usage(stderr);
    }
    return 2;
}
