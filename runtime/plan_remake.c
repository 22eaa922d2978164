/* plan_remake: see plan_remake.h. */
#include "plan_remake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "util.h"

char *plan_compile_temp(const char *graph, const char *policy, const Define *defines, int n_defines, int forward_only) {
    CompileOptions copt = {0};
    copt.front.graph_path = graph;
    copt.front.policy_path = policy;
    copt.front.defines = (Define *)defines;
    copt.front.n_defines = n_defines;
    copt.forward_only = forward_only;
    CompileResult r = compile_graph(&copt);
    char tmpl[] = "/tmp/mmc-plan-XXXXXX";
    if (!mkdtemp(tmpl)) die("cannot make a temp folder for a plan in /tmp");
    char *dir = xstrdup(tmpl), *kpath = path_join(dir, "kernels.cu"), *ppath = path_join(dir, "plan");
    write_file_atomic(kpath, r.kernels, strlen(r.kernels));
    write_file_atomic(ppath, r.plan, strlen(r.plan));
    free(kpath), free(ppath);
    return dir;
}

char *plan_remake(const Plan *pl, const Define *overrides, int n_overrides, int forward_only) {
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
    char *dir = plan_compile_temp(g->source, policy, d, g->n_config, forward_only);
    for (int k = 0; k < g->n_config; k++) free(d[k].value);
    free(d);
    return dir;
}

void plan_remove_temp(const char *dir) {
    char *k = path_join(dir, "kernels.cu"), *p = path_join(dir, "plan");
    unlink(k), unlink(p), rmdir(dir);
    free(k), free(p);
}
