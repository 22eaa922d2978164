/* bench: `mmc bench PLAN_DIR`, the speed of a plan's training step on the GPU, as `make bench`
 * reports it beside PyTorch (bench/train_bench.py): the time to the first step from the
 * start of the process (NVRTC or the kernel cache, allocation, initialisation), then the
 * median of device-event timings over consecutive steps after a warm-up, the kernel
 * launches of a step (the nodes of the captured graphs), the device memory mmc took (every
 * allocation, the cuBLASLt workspace, the kernels' own arrays and the graphs included), and
 * with --profile each kernel of one step timed on its own, sorted, so the next bottleneck
 * shows without a profiler; with --gemms, each GEMM timed alone with the algorithm in use
 * and with the others cuBLASLt's heuristic offers. The batch is random token ids (every input filled below the
 * model's vocabulary); the numbers do not depend on the text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "init.h"
#include "train.h"
#include "util.h"

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill_inputs(Backend *b, uint64_t seed) {
    const Graph *g = b->pl->g;
    /* any ids below the vocabulary (the graph's model{}, if it has one) */
    const ModelInfo *m = &b->pl->g->model;
    uint32_t vocab = model_has(m, MF_VOCAB) ? (uint32_t)m->value[MF_VOCAB] : 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op != OP_INPUT) continue;
        int64_t count = shape_numel(&n->shape);
        int32_t *ids = xmalloc((size_t)count * sizeof *ids + 1);
        for (int64_t k = 0; k < count; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            ids[k] = (int32_t)(seed % (uint64_t)vocab);
        }
        b->write(b, n->buffer, n->offset, ids, count * (int64_t)sizeof *ids);
        free(ids);
    }
}

static void step(Backend *b) {
    for (int a = 0; a < b->pl->g->train.accumulation; a++) b->run_phase(b, PHASE_MICRO);
    b->run_phase(b, PHASE_UPDATE);
}

/* what a kernel is, for the profile's totals: its op (and GEMM layout), or its role */
static const char *category(const Group *gr, char *buf, size_t n) {
    if (gr->kind == GK_GEMM && gr->n_nodes > 1) snprintf(buf, n, "gemm %s + epilogue", op_info[gr->anchor->op].name);
    else if (gr->kind == GK_GEMM) snprintf(buf, n, "gemm %s", op_info[gr->anchor->op].name);
    else if (gr->kind == GK_OPTIMIZER) snprintf(buf, n, "update %s", optimizer_kernel_name(gr->optimizer));
    else if (gr->kind == GK_CAST_PARAMS) snprintf(buf, n, "cast_weights");
    else if (gr->kind == GK_GRADS) snprintf(buf, n, "grad_accumulate");
    else if (gr->kind == GK_ELEMENTWISE) snprintf(buf, n, "elementwise");
    else snprintf(buf, n, "%s", op_info[gr->anchor->op].name);
    return buf;
}

typedef struct Row {
    const char *name;
    char cat[64];
    double ms;
} Row;

typedef struct Total {
    char cat[64];
    double ms;
    int kernels;
} Total;

static int by_ms_desc(const void *a, const void *b) {
    double x = ((const Row *)a)->ms, y = ((const Row *)b)->ms;
    return (x < y) - (x > y);
}

static int total_desc(const void *a, const void *b) {
    double x = ((const Total *)a)->ms, y = ((const Total *)b)->ms;
    return (x < y) - (x > y);
}

/* each kernel of one step, alone between two events: the least of `reps` runs */
static Row *profile(Backend *b, int reps, int *n_rows, double *total) {
    const Program *p = b->pl->p;
    double *best = xmalloc((size_t)p->n_groups * sizeof *best), *ms = xmalloc((size_t)p->n_groups * sizeof *ms);
    for (int i = 0; i < p->n_groups; i++) best[i] = INFINITY;
    for (int r = 0; r < reps; r++)
        for (int ph = 0; ph < 2; ph++) {
            b->probe->profile_phase(b, (Phase)ph, ms);
            for (int i = 0; i < p->n_groups; i++)
                if (p->groups[i]->phase == (Phase)ph && ms[i] < best[i]) best[i] = ms[i];
        }
    Row *rows = xcalloc((size_t)p->n_groups, sizeof *rows);
    *total = 0;
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        double per_step = best[i] * (gr->phase == PHASE_MICRO ? b->pl->g->train.accumulation : 1);
        rows[i].name = gr->kernel;
        category(gr, rows[i].cat, sizeof rows[i].cat);
        rows[i].ms = per_step;
        *total += per_step;
    }
    *n_rows = p->n_groups;
    free(best), free(ms);
    return rows;
}

int cmd_bench(int argc, char **argv) {
    double t_start = now_seconds();
    const char *dir = NULL, *json = NULL;
    int64_t steps = 30, warmup = 5;
    int show_profile = 0, top = 25, gemms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--steps") || !strcmp(a, "--warmup") || !strcmp(a, "--json") || !strcmp(a, "--top")) && i + 1 >= argc)
            die("bench: %s needs a value", a);
        if (!strcmp(a, "--steps")) steps = option_int("bench", a, argv[++i], 1);
        else if (!strcmp(a, "--warmup")) warmup = option_int("bench", a, argv[++i], 1);
        else if (!strcmp(a, "--top")) top = (int)option_int("bench", a, argv[++i], 1);
        else if (!strcmp(a, "--json")) json = argv[++i];
        else if (!strcmp(a, "--profile")) show_profile = 1;
        else if (!strcmp(a, "--gemms")) gemms = 1;
        else if (a[0] == '-') die("bench: unknown option %s", a);
        else if (!dir) dir = a;
        else die("bench: one plan folder at a time (got %s and %s)", dir, a);
    }
    if (!dir) die("bench: which plan? usage: mmc bench PLAN_DIR [--steps N] [--warmup N] [--profile] [--gemms] [--json FILE]");
    if (steps > 250) die("bench: --steps %lld: at most 250", (long long)steps);
    if (warmup < 3) warmup = 3; /* the first two runs of a phase launch kernel by kernel, then capture */
    Plan *pl = plan_load(dir);
    char *why = NULL;
    Backend *b = cuda_backend_create(pl, &why);
    if (!b) die("bench: %s (mmc bench measures the cuda backend)", why);
    const Graph *g = pl->g;
    init_consts(b);
    init_params(b, 1);
    MmcStepState st = init_state(pl, warmup + steps + 8);
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    fill_inputs(b, 0x9e3779b97f4a7c15ull);

    step(b);
    b->wait(b, b->fence(b));
    double first_step_s = now_seconds() - t_start;
    for (int64_t s = 1; s < warmup; s++) step(b);
    int *marks = xmalloc((size_t)(steps + 1) * sizeof *marks);
    marks[0] = b->probe->mark(b);
    for (int64_t s = 0; s < steps; s++) {
        step(b);
        marks[s + 1] = b->probe->mark(b);
    }
    double *ms = xmalloc((size_t)steps * sizeof *ms);
    for (int64_t s = 0; s < steps; s++) ms[s] = b->probe->ms_between(b, marks[s], marks[s + 1]);
    qsort(ms, (size_t)steps, sizeof *ms, by_value);
    double median = steps % 2 ? ms[steps / 2] : 0.5 * (ms[steps / 2 - 1] + ms[steps / 2]);
    int64_t device_bytes = b->probe->device_bytes(b);
    int acc = g->train.accumulation;
    int micro = b->probe->launches(b, PHASE_MICRO), update = b->probe->launches(b, PHASE_UPDATE);
    int launches = micro * acc + update;
    int64_t params = 0, tokens = 0, batch = 0, seq = 0;
    for (int i = 0; i < g->n_params; i++) params += shape_numel(&g->params[i].node->shape);
    for (int i = 0; i < g->n_nodes && !tokens; i++)
        if (g->nodes[i]->op == OP_INPUT) {
            const Shape *s = &g->nodes[i]->shape;
            tokens = shape_numel(s) * acc;
            batch = s->rank > 0 ? s->dim[0] : 1;
            seq = s->rank > 1 ? s->dim[1] : 1;
        }
    double tok_s = (double)tokens / (median * 1e-3);
    printf("mmc %s (%s, batch %lld, seq %lld): %.2f ms/step (min %.2f, max %.2f over %lld steps), %.3f M tokens/s, "
           "%.2f GiB of device memory, %d kernel launches a step (%d a micro-step, %d in the update), first step after %.2f s\n",
           dir, g->policy.name, (long long)batch, (long long)seq, median, ms[0], ms[steps - 1], (long long)steps, tok_s / 1e6,
           (double)device_bytes / (1 << 30), launches, micro, update, first_step_s);

    Row *rows = NULL;
    int n_rows = 0;
    double total = 0;
    if (show_profile) {
        rows = profile(b, 3, &n_rows, &total);
        qsort(rows, (size_t)n_rows, sizeof *rows, by_ms_desc);
        printf("\none step kernel by kernel (each alone between two events, the least of 3 runs): %.2f ms in all\n", total);
        printf("  %8s %6s %6s  %-24s %s\n", "ms", "share", "cumul", "what", "kernel");
        double cum = 0;
        for (int i = 0; i < n_rows && i < top; i++) {
            cum += rows[i].ms;
            printf("  %8.3f %5.1f%% %5.1f%%  %-24s %s\n", rows[i].ms, 100 * rows[i].ms / total, 100 * cum / total, rows[i].cat,
                   rows[i].name);
        }
        /* totals by what the kernels are */
        Total *cats = xcalloc((size_t)n_rows, sizeof *cats);
        int n_cats = 0;
        for (int i = 0; i < n_rows; i++) {
            int k = 0;
            while (k < n_cats && strcmp(cats[k].cat, rows[i].cat)) k++;
            if (k == n_cats) snprintf(cats[n_cats++].cat, sizeof cats[0].cat, "%s", rows[i].cat);
            cats[k].ms += rows[i].ms;
            cats[k].kernels++;
        }
        qsort(cats, (size_t)n_cats, sizeof *cats, total_desc);
        printf("\n  by kind:\n");
        for (int k = 0; k < n_cats; k++)
            printf("  %8.3f %5.1f%%  %-24s %d kernels\n", cats[k].ms, 100 * cats[k].ms / total, cats[k].cat, cats[k].kernels);
        free(cats);
    }
    if (gemms) {
        const Program *p = pl->p;
        double in_use = 0, best = 0, ms[16];
        printf("\neach GEMM with the algorithm in use (#0) and the heuristic's others (ms a call, the best of 5):\n");
        for (int i = 0; i < p->n_groups; i++) {
            if (p->groups[i]->kind != GK_GEMM || p->groups[i]->n_nodes > 1) continue; /* cuBLASLt's only */
            int n = b->probe->gemm_candidates(b, i, 16, ms), at = 0;
            for (int k = 1; k < n; k++)
                if (ms[k] < ms[at]) at = k;
            int reps = p->groups[i]->phase == PHASE_MICRO ? g->train.accumulation : 1;
            in_use += ms[0] * reps, best += ms[at] * reps;
            GemmShape s = gemm_shape(p->groups[i]->anchor);
            printf("  %-58s m=%-6lld n=%-5lld k=%-6lld %8.4f  best %8.4f (#%d of %d)\n", p->groups[i]->kernel, (long long)s.m,
                   (long long)s.n, (long long)s.k, ms[0], ms[at], at, n);
        }
        printf("  GEMMs of a step: %.3f ms with the algorithms in use, %.3f ms with the best of each\n", in_use, best);
    }
    if (json) {
        StrBuf o = {0};
        sb_printf(&o, "{\"setup\": \"mmc\", \"plan\": \"%s\", \"policy\": \"%s\", \"rounding\": \"%s\", \"batch\": %lld, "
                      "\"seq\": %lld, \"accumulation\": %d, \"tokens_per_step\": %lld, \"params\": %lld, \"steps\": %lld, "
                      "\"ms_per_step\": %.4f, \"ms_min\": %.4f, \"ms_max\": %.4f, \"tokens_per_s\": %.1f, "
                      "\"device_bytes\": %lld, \"launches_per_step\": %d, \"launches_micro\": %d, \"launches_update\": %d, "
                      "\"first_step_s\": %.3f",
                  dir, g->policy.name, g->policy.round_eager ? "eager" : "fused", (long long)batch, (long long)seq, acc,
                  (long long)tokens, (long long)params, (long long)steps, median, ms[0], ms[steps - 1], tok_s,
                  (long long)device_bytes, launches, micro, update, first_step_s);
        if (show_profile) {
            sb_printf(&o, ", \"profile_ms\": %.4f, \"kernels\": [", total);
            for (int i = 0; i < n_rows; i++)
                sb_printf(&o, "%s{\"name\": \"%s\", \"kind\": \"%s\", \"ms\": %.5f}", i ? ", " : "", rows[i].name,
                          rows[i].cat, rows[i].ms);
            sb_append(&o, "]");
        }
        sb_append(&o, "}\n");
        write_file_atomic(json, o.s, o.len);
        sb_free(&o);
    }
    free(rows), free(marks), free(ms);
    b->destroy(b);
    return 0;
}
