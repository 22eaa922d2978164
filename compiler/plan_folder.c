/* plan_folder: a plan folder written: its plans, phases.json last, and nothing left of an
 * earlier compile's schedule (see compile_plans.h). */
#include "compile_plans.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static void remove_file(const char *path) {
    if (unlink(path) != 0 && errno != ENOENT) die("%s: cannot remove: %s", path, strerror(errno));
}

/* a plan's two files, then its folder where nothing else is left in it */
static void remove_plan_dir(const char *dir) {
    char *k = path_join(dir, "kernels.cu"), *p = path_join(dir, "plan");
    remove_file(p); /* the plan first: a folder without it is no plan */
    remove_file(k);
    rmdir(dir);
    free(k), free(p);
}

/* phaseK (K >= 1, written as mmc writes it) or fallback: the folders a compile writes */
static int plan_subdir_name(const char *name, int *phase) {
    *phase = 0;
    if (!strcmp(name, "fallback")) return 1;
    int k;
    char back[32];
    if (sscanf(name, "phase%d", &k) != 1 || k < 1) return 0;
    snprintf(back, sizeof back, "phase%d", k);
    *phase = k;
    return !strcmp(back, name);
}

/* Removes dir's phases.json, and its phaseK/ and fallback/ folders but those `keep` writes
 * again (keep NULL: all of them). */
static void clean(const char *dir, const CompiledPlans *keep) {
    char *json = path_join(dir, "phases.json");
    remove_file(json);
    free(json);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return;
        die("%s: cannot list the folder: %s", dir, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        int k;
        if (!plan_subdir_name(e->d_name, &k)) continue;
        int kept = keep && keep->schedule && (k ? k < keep->n_phases : keep->has_fallback);
        char *sub = path_join(dir, e->d_name);
        struct stat st;
        if (!kept && lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) remove_plan_dir(sub);
        free(sub);
    }
    closedir(d);
}

void plan_folder_clean(const char *dir) { clean(dir, NULL); }

static void write_plan(const char *dir, const CompileResult *r) {
    make_dirs(dir);
    char *kpath = path_join(dir, "kernels.cu"), *ppath = path_join(dir, "plan");
    write_file_atomic(kpath, r->kernels, strlen(r->kernels));
    write_file_atomic(ppath, r->plan, strlen(r->plan));
    free(kpath), free(ppath);
}

static void json_string(StrBuf *o, const char *s) {
    sb_append(o, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(o, "\\%c", *c);
        else if (*c < ' ') sb_printf(o, "\\u%04x", *c);
        else sb_appendn(o, (const char *)c, 1);
    }
    sb_append(o, "\"");
}

/* the keys the runtime reads (runtime/plan_set.c), in this order, on one line */
char *compiled_plans_json(const CompiledPlans *c) {
    const PrecisionSchedule *s = c->schedule;
    StrBuf o = {0};
    char d[32];
    sb_append(&o, "{\"phases\": [");
    for (int k = 0; k < c->n_phases; k++) {
        sb_append(&o, k ? ", {" : "{");
        if (k + 1 < c->n_phases) sb_printf(&o, "\"updates\": %lld, ", (long long)s->phases[k].updates);
        sb_append(&o, "\"policy\": ");
        json_string(&o, c->phase[k].g->policy.name);
        char *dir = compiled_plan_dir(c, k);
        sb_append(&o, ", \"dir\": ");
        json_string(&o, dir);
        free(dir);
        sb_append(&o, "}");
    }
    sb_append(&o, "]");
    if (c->has_fallback) {
        sb_printf(&o, ", \"fallback\": {\"overflow_rate\": %s", fmt_double(d, s->overflow_rate));
        sb_printf(&o, ", \"window\": %lld", (long long)s->window);
        sb_printf(&o, ", \"min_scale\": %s, \"policy\": ", fmt_double(d, s->min_scale));
        json_string(&o, c->fallback.g->policy.name);
        sb_printf(&o, ", \"scale\": %s, \"dir\": \"fallback\"}", fmt_double(d, s->to_scale));
    }
    sb_append(&o, "}\n");
    return o.s;
}

void compiled_plans_write(const CompiledPlans *c, const char *dir) {
    make_dirs(dir);
    /* the old schedule goes first: a write cut short leaves a folder of plans that no
     * phases.json names, never a phases.json naming plans of another compile */
    clean(dir, c);
    for (int k = 0; k + 1 < c->n_phases; k++) {
        char *name = compiled_plan_dir(c, k), *sub = path_join(dir, name);
        write_plan(sub, &c->phase[k]);
        free(name), free(sub);
    }
    if (c->has_fallback) {
        char *sub = path_join(dir, "fallback");
        write_plan(sub, &c->fallback);
        free(sub);
    }
    write_plan(dir, &c->phase[c->n_phases - 1]);
    if (c->schedule) {
        char *json = compiled_plans_json(c), *path = path_join(dir, "phases.json");
        write_file_atomic(path, json, strlen(json));
        free(json), free(path);
    }
}
