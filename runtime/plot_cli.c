/* plot_cli: `mmc plot RUN_DIR... [-o OUT.png]`: the curves of one or more runs, overlaid, in
 * one PNG drawn by gnuplot (Debian's gnuplot-nox): loss and validation loss, learning rate,
 * loss scale with the skipped updates marked, and gradient norm, each against updates. Each
 * run's metrics.jsonl becomes a table in a temporary folder, gnuplot draws from those, and
 * the picture is written to OUT.png through a temp file, fsynced and renamed. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

int plot_available(void) { return system("gnuplot --version >/dev/null 2>&1") == 0; }

/* the temporary folder, removed however the command ends (die exits) */
static char *temp_dir;
static void remove_temp_dir(void) {
    if (!temp_dir) return;
    char *clean = xasprintf("rm -rf '%s'", temp_dir);
    if (system(clean) != 0) fprintf(stderr, "plot: could not remove %s\n", temp_dir);
    free(clean);
}

/* a JSON number field as a double, NaN when absent (gnuplot leaves NaN points out) */
static double num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

typedef struct Table {
    int updates, has_val, has_skips;
} Table;

/* RUN_DIR/metrics.jsonl as columns: update loss val_loss lr scale grad_norm skipped_here,
 * where skipped_here is the scale at an update that was skipped (NaN otherwise) */
static Table write_table(const char *run, const char *table) {
    char *path = xasprintf("%s/metrics.jsonl", run);
    FILE *in = fopen(path, "r");
    if (!in) die("plot: %s: %s (is %s a run folder of mmc train --out?)", path, strerror(errno), run);
    FILE *out = fopen(table, "w");
    if (!out) die("plot: %s: %s", table, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    Table t = {0};
    int lineno = 0;
    double skipped_before = 0;
    while (getline(&line, &cap, in) > 0) {
        lineno++;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (!o || !json_is_object(o)) die("plot: %s:%d: not a JSON object (%s)", path, lineno, o ? "" : err.text);
        double update = num(o, "update"), skipped = num(o, "skipped");
        if (isnan(update)) die("plot: %s:%d: no \"update\"", path, lineno);
        double skip_here = !isnan(skipped) && skipped > skipped_before ? num(o, "scale") : NAN;
        if (!isnan(skipped)) skipped_before = skipped;
        double val = num(o, "val_loss");
        fprintf(out, "%.0f %.9g %.9g %.9g %.9g %.9g %.9g\n", update, num(o, "loss"), val, num(o, "lr"), num(o, "scale"),
                num(o, "grad_norm"), skip_here);
        json_decref(o);
        t.updates++;
        t.has_val |= !isnan(val);
        t.has_skips |= !isnan(skip_here);
    }
    free(line);
    fclose(in);
    if (fclose(out)) die("plot: %s: %s", table, strerror(errno));
    if (!t.updates) die("plot: %s: no updates", path);
    free(path);
    return t;
}

/* a string as a gnuplot single-quoted literal */
static void quoted(StrBuf *b, const char *s) {
    sb_append(b, "'");
    for (; *s; s++) {
        if (*s == '\'') sb_append(b, "''");
        else sb_appendn(b, s, 1);
    }
    sb_append(b, "'");
}

/* one panel: column `col` of every run, with `extra` (more plot elements, or "") after */
static void panel(StrBuf *g, char **tables, char **names, int runs, const char *title, const char *ylabel, int col,
                  int log_y, const char *extra) {
    sb_printf(g, "set title '%s'\nset ylabel '%s'\n%s\nplot ", title, ylabel, log_y ? "set logscale y" : "unset logscale y");
    for (int r = 0; r < runs; r++) {
        sb_append(g, r ? ", " : "");
        quoted(g, tables[r]);
        sb_printf(g, " using 1:%d with lines linestyle %d title ", col, r + 1);
        quoted(g, names[r]);
    }
    sb_append(g, extra);
    sb_append(g, "\n");
}

int cmd_plot(int argc, char **argv) {
    const char *out = "curves.png";
    char **runs = xcalloc((size_t)argc, sizeof *runs);
    int n_runs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') die("plot: unknown option %s (usage: mmc plot RUN_DIR... [-o OUT.png])", argv[i]);
        else runs[n_runs++] = argv[i];
    }
    if (!n_runs) die("plot: which runs? usage: mmc plot RUN_DIR... [-o OUT.png]");
    if (!plot_available()) die("plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *tmpl = xasprintf("%s/mmc-plot-XXXXXX", tmp);
    char *dir = mkdtemp(tmpl);
    if (!dir) die("plot: a temporary folder: %s", strerror(errno));
    temp_dir = dir;
    atexit(remove_temp_dir);
    char **tables = xcalloc((size_t)n_runs, sizeof *tables), **names = xcalloc((size_t)n_runs, sizeof *names);
    Table *info = xcalloc((size_t)n_runs, sizeof *info);
    for (int r = 0; r < n_runs; r++) {
        tables[r] = xasprintf("%s/run%d.dat", dir, r);
        info[r] = write_table(runs[r], tables[r]);
        const char *slash = strrchr(runs[r], '/');
        names[r] = xstrdup(slash && slash[1] ? slash + 1 : runs[r]);
    }
    char *png = xasprintf("%s/curves.png", dir), *script = xasprintf("%s/curves.gp", dir);
    StrBuf g = {0};
    /* noenhanced: run names are shown as written (amp_fp16's underscore is no subscript) */
    sb_append(&g, "set terminal pngcairo size 1400,1000 font ',10' noenhanced\nset output ");
    quoted(&g, png);
    sb_append(&g, "\nset datafile missing 'nan'\nset multiplot layout 2,2\nset grid\nset key top right\n"
                  "set xlabel 'update'\n");
    for (int r = 0; r < n_runs; r++) sb_printf(&g, "set linestyle %d linecolor %d linewidth 1.5\n", r + 1, r + 1);
    /* validation losses and skipped updates only for the runs that have some: gnuplot refuses
     * a curve with no points */
    StrBuf val = {0}, skips = {0};
    for (int r = 0; r < n_runs; r++) {
        if (info[r].has_val) {
            sb_append(&val, ", ");
            quoted(&val, tables[r]);
            sb_printf(&val, " using 1:3 with linespoints linestyle %d dashtype 2 pointtype 7 title ", r + 1);
            quoted(&val, names[r]);
            sb_append(&val, ".' (validation)'");
        }
        if (info[r].has_skips) {
            sb_append(&skips, ", ");
            quoted(&skips, tables[r]);
            sb_printf(&skips, " using 1:7 with points linestyle %d pointtype 2 pointsize 1.5 title ", r + 1);
            quoted(&skips, names[r]);
            sb_append(&skips, ".' skipped'");
        }
    }
    panel(&g, tables, names, n_runs, "loss (dashed: validation)", "loss", 2, 0, val.s ? val.s : "");
    panel(&g, tables, names, n_runs, "learning rate", "lr", 4, 0, "");
    panel(&g, tables, names, n_runs, "loss scale (x: skipped updates)", "scale", 5, 1, skips.s ? skips.s : "");
    panel(&g, tables, names, n_runs, "gradient norm (before clipping)", "norm", 6, 1, "");
    sb_append(&g, "unset multiplot\n");
    write_file_atomic(script, g.s, g.len);
    char *cmd = xasprintf("gnuplot '%s' 2>'%s/gnuplot.err'", script, dir);
    int rc = system(cmd);
    size_t size = 0;
    char *picture = rc == 0 ? try_read_file(png, &size) : NULL;
    if (!picture || !size) {
        char *errs = xasprintf("%s/gnuplot.err", dir);
        size_t elen = 0;
        char *text = try_read_file(errs, &elen);
        die("plot: gnuplot failed (%s)", text && elen ? text : "no output");
    }
    write_file_atomic(out, picture, size);
    printf("plot: %s (%d run%s)\n", out, n_runs, n_runs > 1 ? "s" : "");
    free(picture), free(cmd), free(png), free(script);
    sb_free(&g), sb_free(&val), sb_free(&skips);
    for (int r = 0; r < n_runs; r++) free(tables[r]), free(names[r]);
    free(tables), free(names), free(runs), free(info); /* tmpl stays: the exit handler removes it */
    return 0;
}
