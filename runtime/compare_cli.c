/* compare_cli: `mmc compare GRAPH.lua --policies fp32,amp_fp16,... --data FILE --val FILE
 * --steps N --out DIR`: the graph trained under each policy, one after another on one
 * backend, from the same initial weights (the same --seed) on the same batches (the same
 * --shuffle), each evaluated on the validation file at the end. It prints a table (final
 * train loss, validation perplexity and its difference from the fp32 run, flagged past 5%,
 * tokens/s, peak device memory, skipped updates, lowest loss scale), writes DIR/summary.json
 * and draws the runs' curves into DIR/compare.png with `mmc plot`. Each run's folder is
 * DIR/POLICY. An entry may be a precision schedule instead of a policy: POLICY:N+...+POLICY,
 * N updates of each policy in turn and the last to the end ("fp32:100+amp_fp16", an fp32
 * warm-up), run as train{ schedule = {...} } would run it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan_remake.h"
#include "precision_schedule.h"
#include "train.h"
#include "util.h"

enum { MAX_POLICIES = 16 };

/* past this relative difference from the fp32 run's perplexity, a row is flagged */
#define PPL_FLAG 0.05

typedef struct Row {
    char *policy, *name; /* as given (a built-in name or a file, or a schedule), and the run folder's name */
    PrecisionSchedule *schedule; /* the entry's schedule, or NULL for a policy */
    double train_loss;   /* mean of the last (up to) 10 updates' losses */
    double val_loss, val_ppl;
    double tokens_per_s;
    int64_t device_bytes;
    int skipped;
    double lowest_scale;
} Row;

/* "graphs/policies/my_amp.lua" -> "my_amp"; a built-in name stays */
static char *policy_folder_name(const char *policy) {
    const char *base = strrchr(policy, '/');
    base = base ? base + 1 : policy;
    size_t n = strlen(base);
    if (n > 4 && !strcmp(base + n - 4, ".lua")) n -= 4;
    char *s = xstrndup(base, n);
    for (char *c = s; *c; c++)
        if (!(('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') || ('0' <= *c && *c <= '9') || *c == '_' || *c == '-' || *c == '.'))
            *c = '_';
    return s;
}

/* An entry POLICY:N+...+POLICY as a schedule (NULL for a plain policy); dies naming the entry
 * when a phase but the last lacks its updates, or the last has some. */
static PrecisionSchedule *entry_schedule(const char *entry) {
    if (!strchr(entry, '+')) return NULL;
    PrecisionSchedule *s = xcalloc(1, sizeof *s);
    s->where = xasprintf("mmc compare --policies %s", entry);
    char *text = xstrdup(entry), *save = NULL;
    int cap = 0;
    for (char *part = strtok_r(text, "+", &save); part; part = strtok_r(NULL, "+", &save)) {
        char *colon = strrchr(part, ':');
        SchedulePhase ph = {0, NULL};
        if (colon) {
            char *end;
            ph.updates = strtoll(colon + 1, &end, 10);
            if (*end || ph.updates < 1) die("compare: %s: '%s' is not POLICY:N with N updates >= 1", entry, part);
            *colon = 0;
        }
        ph.policy = xstrdup(part);
        vec_push(s->phases, s->n_phases, cap, ph);
    }
    free(text);
    if (s->n_phases < 2 || s->n_phases > PRECISION_MAX_PHASES) die("compare: %s: a schedule has 2 to %d phases", entry, PRECISION_MAX_PHASES);
    for (int k = 0; k < s->n_phases; k++)
        if ((k < s->n_phases - 1) != (s->phases[k].updates > 0))
            die("compare: %s: every phase but the last needs its updates (POLICY:N), and the last runs to the end", entry);
    return s;
}

/* a schedule's run folder: each phase's policy folder name with its updates, "fp32_100+amp_fp16" */
static char *entry_folder_name(const char *entry, const PrecisionSchedule *s) {
    if (!s) return policy_folder_name(entry);
    StrBuf b = {0};
    for (int k = 0; k < s->n_phases; k++) {
        char *name = policy_folder_name(s->phases[k].policy);
        sb_printf(&b, "%s%s", k ? "+" : "", name);
        if (s->phases[k].updates) sb_printf(&b, "_%lld", (long long)s->phases[k].updates);
        free(name);
    }
    return b.s;
}

/* the run's metrics.jsonl: the last losses, the last evaluation, skips and the lowest scale */
static void read_metrics(const char *dir, Row *row) {
    char *path = path_join(dir, "metrics.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) die("compare: %s: cannot read it", path);
    double last[10];
    int n = 0;
    row->val_loss = row->val_ppl = NAN;
    row->lowest_scale = INFINITY;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (!o) die("compare: %s: %s", path, err.text);
        last[n++ % 10] = json_number_value(json_object_get(o, "loss"));
        double scale = json_number_value(json_object_get(o, "scale"));
        if (scale < row->lowest_scale) row->lowest_scale = scale;
        row->skipped = (int)json_integer_value(json_object_get(o, "skipped"));
        json_t *v = json_object_get(o, "val_loss");
        if (json_is_number(v)) row->val_loss = json_number_value(v), row->val_ppl = exp(row->val_loss);
        json_decref(o);
    }
    fclose(f);
    if (!n) die("compare: %s holds no update", path);
    int k = n < 10 ? n : 10;
    row->train_loss = 0;
    for (int i = 0; i < k; i++) row->train_loss += last[i];
    row->train_loss /= k;
    free(path);
}

static void print_table(const Row *rows, int n, int base) {
    printf("\n| policy | final train loss | val ppl | vs %s | tokens/s | peak GiB | skipped | lowest scale |\n", rows[base].name);
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < n; i++) {
        const Row *r = &rows[i];
        double d = r->val_ppl / rows[base].val_ppl - 1;
        char mem[32] = "-";
        if (r->device_bytes >= 0) snprintf(mem, sizeof mem, "%.2f", (double)r->device_bytes / (1 << 30));
        printf("| %s | %.4f | %.3f | %s%+.2f%%%s | %.0f | %s | %d | %g |\n", r->name, r->train_loss, r->val_ppl,
               fabs(d) > PPL_FLAG ? "**" : "", 100 * d, fabs(d) > PPL_FLAG ? " (past 5%)**" : "", r->tokens_per_s, mem,
               r->skipped, r->lowest_scale);
    }
}

static void write_summary(const char *out, const char *graph, int64_t steps, const Row *rows, int n, int base) {
    json_t *root = json_object(), *runs = json_array();
    json_object_set_new(root, "graph", json_string(graph));
    json_object_set_new(root, "steps", json_integer(steps));
    json_object_set_new(root, "baseline", json_string(rows[base].name));
    for (int i = 0; i < n; i++) {
        const Row *r = &rows[i];
        json_t *o = json_object();
        double d = r->val_ppl / rows[base].val_ppl - 1;
        json_object_set_new(o, "policy", json_string(r->policy));
        json_object_set_new(o, "run", json_string(r->name));
        json_object_set_new(o, "train_loss", json_real(r->train_loss));
        json_object_set_new(o, "val_loss", json_real(r->val_loss));
        json_object_set_new(o, "val_ppl", json_real(r->val_ppl));
        json_object_set_new(o, "val_ppl_vs_baseline", json_real(d));
        json_object_set_new(o, "flagged", json_boolean(fabs(d) > PPL_FLAG));
        json_object_set_new(o, "tokens_per_s", json_real(r->tokens_per_s));
        json_object_set_new(o, "device_bytes", r->device_bytes >= 0 ? json_integer(r->device_bytes) : json_null());
        json_object_set_new(o, "skipped", json_integer(r->skipped));
        json_object_set_new(o, "lowest_scale", json_real(r->lowest_scale));
        json_array_append_new(runs, o);
    }
    json_object_set_new(root, "runs", runs);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    char *path = path_join(out, "summary.json"), *with_nl = xasprintf("%s\n", text);
    write_file_atomic(path, with_nl, strlen(with_nl));
    free(path), free(with_nl), free(text);
}

int cmd_compare(int argc, char **argv) {
    const char *graph = NULL, *policies = NULL, *out = NULL, *backend = "auto";
    TrainOptions base_opt = {0};
    base_opt.seed = 1;
    base_opt.log_interval = 100;
    Define *defines = NULL;
    int n_defines = 0, cap_defines = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (a[0] == '-' && strcmp(a, "--quiet") && !has) die("compare: %s needs a value", a);
        if (!strcmp(a, "--policies")) policies = argv[++i];
        else if (!strcmp(a, "--data")) base_opt.data = argv[++i];
        else if (!strcmp(a, "--val")) base_opt.val = argv[++i];
        else if (!strcmp(a, "--steps")) base_opt.steps = option_int("compare", a, argv[++i], 1);
        else if (!strcmp(a, "--out")) out = argv[++i];
        else if (!strcmp(a, "--backend")) backend = argv[++i];
        else if (!strcmp(a, "--seed")) base_opt.seed = (uint64_t)option_range("compare", a, argv[++i], 0, INT64_MAX);
        else if (!strcmp(a, "--shuffle")) base_opt.shuffle = (uint64_t)option_range("compare", a, argv[++i], 0, INT64_MAX - 1) + 1;
        else if (!strcmp(a, "--val-batches")) base_opt.val_batches = option_int("compare", a, argv[++i], 1);
        else if (!strcmp(a, "--log-interval")) base_opt.log_interval = (int)option_int("compare", a, argv[++i], 1);
        else if (!strcmp(a, "--quiet")) base_opt.quiet = 1;
        else if (!strcmp(a, "-D")) {
            const char *kv = argv[++i], *eq = strchr(kv, '=');
            if (!eq || eq == kv) die("compare: -D needs key=value, got '%s'", kv);
            Define d = {xstrndup(kv, (size_t)(eq - kv)), xstrdup(eq + 1)};
            vec_push(defines, n_defines, cap_defines, d);
        } else if (a[0] == '-') {
            static const char *const known[] = {"--policies", "--data", "--val", "--steps", "--out", "--backend", "--seed",
                                                "--shuffle", "--val-batches", "--log-interval", "--quiet", "-D", NULL};
            die_unknown_option("compare", a, known);
        } else if (!graph) graph = a;
        else die("compare: one graph file at a time (got %s and %s)", graph, a);
    }
    if (!graph || !policies || !base_opt.data || !base_opt.val || !base_opt.steps || !out)
        die("compare: usage: mmc compare GRAPH.lua --policies fp32,amp_fp16,... --data FILE --val FILE --steps N --out DIR "
            "[--backend ref|cuda] [--seed N] [--shuffle N] [-D key=value]...");
    if (!out[0]) die("compare: --out needs a folder, not an empty name");
    base_opt.backend = backend;
    base_opt.eval_interval = base_opt.steps; /* one evaluation, at the end */
    base_opt.save_interval = 0;
    base_opt.force = 1;
    Row rows[MAX_POLICIES] = {{0}};
    int n = 0;
    char *list = xstrdup(policies), *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (n == MAX_POLICIES) die("compare: at most %d policies", MAX_POLICIES);
        rows[n].policy = xstrdup(p);
        rows[n].schedule = entry_schedule(p);
        rows[n].name = entry_folder_name(p, rows[n].schedule);
        for (int k = 0; k < n; k++)
            if (!strcmp(rows[k].name, rows[n].name)) die("compare: --policies names %s twice", rows[n].name);
        n++;
    }
    free(list);
    if (n < 1) die("compare: --policies names no policy");
    /* said before the runs, not after them */
    int plot = plot_available();
    if (!plot) fprintf(stderr, "compare: gnuplot is not installed (Debian: apt-get install gnuplot-nox): no compare.png; "
                               "mmc plot draws it later from the run folders\n");
    make_dirs(out);
    for (int i = 0; i < n; i++) {
        Row *row = &rows[i];
        char *plan = row->schedule ? plan_compile_temp_scheduled(graph, NULL, row->schedule, defines, n_defines, NULL, 0, 0)
                                   : plan_compile_temp(graph, row->policy, defines, n_defines, NULL, 0, 0);
        TrainResult result = {0};
        TrainOptions o = base_opt;
        char *run_dir = path_join(out, row->name), *plan_name = xasprintf("%s under %s", graph, row->policy);
        o.plan_dir = plan, o.plan_name = plan_name, o.out = run_dir, o.result = &result;
        if (!o.quiet) printf("\n== mmc compare: %s (%d of %d)\n", row->policy, i + 1, n);
        fflush(stdout);
        int rc = train_run(&o);
        plan_remove_temp(plan);
        free(plan), free(plan_name);
        if (rc) die("compare: the run under %s stopped (status %d)", row->policy, rc);
        read_metrics(run_dir, row);
        row->tokens_per_s = result.seconds > 0 ? result.tokens / result.seconds : 0;
        row->device_bytes = result.device_bytes;
        free(run_dir);
    }
    int base = 0; /* the fp32 run where there is one, else the first */
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, "fp32")) base = i;
    print_table(rows, n, base);
    write_summary(out, graph, base_opt.steps, rows, n, base);
    /* the curves of every run in one picture */
    int pc = 0;
    char **pargv = xcalloc((size_t)n + 4, sizeof *pargv);
    pargv[pc++] = "plot";
    char **dirs = xcalloc((size_t)n, sizeof *dirs);
    for (int i = 0; i < n; i++) pargv[pc++] = dirs[i] = path_join(out, rows[i].name);
    char *png = path_join(out, "compare.png");
    pargv[pc++] = "-o";
    pargv[pc++] = png;
    int rc = plot ? cmd_plot(pc, pargv) : 0;
    if (plot) printf("mmc compare: %s/summary.json, %s\n", out, png);
    else printf("mmc compare: %s/summary.json\n", out);
    for (int i = 0; i < n; i++) {
        free(dirs[i]), free(rows[i].policy), free(rows[i].name);
        PrecisionSchedule *ps = rows[i].schedule;
        if (!ps) continue;
        for (int k = 0; k < ps->n_phases; k++) free(ps->phases[k].policy);
        free(ps->phases), free(ps->where), free(ps);
    }
    for (int i = 0; i < n_defines; i++) free(defines[i].key), free(defines[i].value);
    free(dirs), free(pargv), free(png), free(defines);
    return rc;
}
