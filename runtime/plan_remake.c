/* plan_remake: see plan_remake.h. */
#include "plan_remake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "compile_plans.h"
#include "util.h"

char *plan_compile_temp(const char *graph, const char *policy, const Define *defines, int n_defines, const Define *train,
                        int n_train, int forward_only) {
    return plan_compile_temp_scheduled(graph, policy, NULL, defines, n_defines, train, n_train, forward_only);
}

char *plan_compile_temp_scheduled(const char *graph, const char *policy, const struct PrecisionSchedule *schedule,
                                  const Define *defines, int n_defines, const Define *train, int n_train, int forward_only) {
    CompileOptions copt = {0};
    copt.front.schedule = schedule;
    copt.front.graph_path = graph;
    copt.front.policy_path = policy;
    copt.front.defines = (Define *)defines;
    copt.front.n_defines = n_defines;
    copt.front.train_settings = train;
    copt.front.n_train_settings = n_train;
    copt.forward_only = forward_only;
    /* every plan of a precision schedule, each with the same settings and overrides */
    CompiledPlans plans = compile_plans(&copt);
    char tmpl[] = "/tmp/mmc-plan-XXXXXX";
    if (!mkdtemp(tmpl)) die("cannot make a temp folder for a plan in /tmp");
    char *dir = xstrdup(tmpl);
    compiled_plans_write(&plans, dir);
    return dir;
}

char *plan_remake(const Plan *pl, const Define *overrides, int n_overrides, const Define *train, int n_train, int forward_only) {
    const Graph *g = pl->g;
    if (!g->source || access(g->source, R_OK) != 0)
        die("%s: its graph file %s cannot be read from here, so the plan cannot be made again", pl->path,
            g->source ? g->source : "(none named)");
    for (int i = 0; i < n_overrides; i++) {
        int known = 0;
        for (int k = 0; k < g->n_config; k++) known |= !strcmp(g->config[k].key, overrides[i].key);
        if (!known)
            die("%s: the graph %s has no setting '%s' in its config, so it cannot be changed at train time: set it in "
                "the graph file",
                pl->path, g->source, overrides[i].key);
    }
    Define *d = xcalloc((size_t)g->n_config + 1, sizeof *d);
    for (int k = 0; k < g->n_config; k++) {
        const ConfigEntry *e = &g->config[k];
        d[k].key = e->key;
        d[k].value = e->text ? xstrdup(e->text) : xasprintf("%.17g", e->value);
        for (int i = 0; i < n_overrides; i++)
            if (!strcmp(overrides[i].key, e->key)) free(d[k].value), d[k].value = xstrdup(overrides[i].value);
    }
    /* a policy file where the plan was made from one; a built-in policy by its name */
    const char *policy = g->policy.source && access(g->policy.source, R_OK) == 0 ? g->policy.source : g->policy.name;
    char *dir = plan_compile_temp(g->source, policy, d, g->n_config, train, n_train, forward_only);
    for (int k = 0; k < g->n_config; k++) free(d[k].value);
    free(d);
    return dir;
}

void plan_remove_temp(const char *dir) {
    plan_folder_clean(dir); /* a schedule's phases.json, phaseK/ and fallback/ */
    char *k = path_join(dir, "kernels.cu"), *p = path_join(dir, "plan");
    unlink(k), unlink(p), rmdir(dir);
    free(k), free(p);
}

/* the "mmc" section of RUN_DIR/config.json, or NULL without a run folder; dies on bad JSON */
static json_t *run_json(const char *cmd, const char *run_dir, json_t **root) {
    *root = NULL;
    if (!run_dir) return NULL;
    char *path = path_join(run_dir, "config.json");
    json_error_t err;
    *root = json_load_file(path, 0, &err);
    if (!*root) die("%s: %s:%d: %s", cmd, path, err.line, err.text);
    free(path);
    return json_object_get(*root, "mmc");
}

static char *json_text(json_t *v) {
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    if (json_is_number(v)) return xasprintf("%.17g", json_number_value(v));
    return NULL;
}

char *run_setting(const char *run_dir, const char *key) {
    json_t *root, *mmc = run_json("mmc", run_dir, &root);
    char *v = mmc ? json_text(json_object_get(mmc, key)) : NULL;
    if (root) json_decref(root);
    return v;
}

char *plan_from_run(const char *cmd, const char *run_dir, const char *graph, const char *policy, const Define *overrides,
                    int n_overrides, int forward_only) {
    json_t *root, *mmc = run_json(cmd, run_dir, &root);
    char *where = run_dir ? path_join(run_dir, "config.json") : xstrdup("--graph");
    if (!graph && mmc && json_is_string(json_object_get(mmc, "source"))) graph = json_string_value(json_object_get(mmc, "source"));
    if (!graph && run_dir)
        die("%s: %s names no graph file: give it with --graph FILE (and the -D settings it was trained with)", cmd, where);
    if (!graph)
        die("%s: no run folder (no config.json beside the weights) names the graph: give it with --graph FILE (and the "
            "-D settings it was trained with)", cmd);
    if (access(graph, R_OK) != 0) die("%s: the graph file %s (from %s) cannot be read from here: give it with --graph FILE", cmd, graph, where);
    /* the run's policy file where it is one (a built-in policy is known by its name) */
    const char *psrc = mmc ? json_string_value(json_object_get(mmc, "policy_source")) : NULL;
    if (!policy && psrc && access(psrc, R_OK) == 0) policy = psrc;
    if (!policy && mmc) policy = json_string_value(json_object_get(mmc, "policy"));
    int n = n_overrides, cap = n_overrides + 1;
    Define *d = xcalloc((size_t)cap, sizeof *d);
    for (int i = 0; i < n_overrides; i++) d[i] = (Define){xstrdup(overrides[i].key), xstrdup(overrides[i].value)};
    if (mmc) { /* every other setting the run was trained with */
        static const char *const not_settings[] = {"graph",  "plan_hash", "policy", "source", "policy_source",
                                                   "model", "export_hf", NULL};
        const char *key;
        json_t *v;
        json_object_foreach(mmc, key, v) {
            int skip = 0;
            for (int k = 0; not_settings[k]; k++) skip |= !strcmp(key, not_settings[k]);
            for (int i = 0; i < n; i++) skip |= !strcmp(d[i].key, key);
            char *text = skip ? NULL : json_text(v);
            if (!text) continue;
            Define e = {xstrdup(key), text};
            vec_push(d, n, cap, e);
        }
    }
    char *dir = plan_compile_temp(graph, policy, d, n, NULL, 0, forward_only);
    for (int i = 0; i < n; i++) free(d[i].key), free(d[i].value);
    free(d), free(where);
    if (root) json_decref(root);
    return dir;
}
