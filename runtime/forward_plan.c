/* forward_plan: see forward_plan.h. */
#include "forward_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "util.h"

char *forward_plan_compile(const char *graph, const char *policy, const Define *defines, int n_defines) {
    CompileOptions copt = {0};
    copt.front.graph_path = graph;
    copt.front.policy_path = policy;
    copt.front.defines = (Define *)defines;
    copt.front.n_defines = n_defines;
    copt.forward_only = 1;
    CompileResult r = compile_graph(&copt);
    char tmpl[] = "/tmp/mmc-forward-XXXXXX";
    if (!mkdtemp(tmpl)) die("cannot make a temp folder for a forward plan in /tmp");
    char *dir = xstrdup(tmpl), *kpath = path_join(dir, "kernels.cu"), *ppath = path_join(dir, "plan");
    write_file_atomic(kpath, r.kernels, strlen(r.kernels));
    write_file_atomic(ppath, r.plan, strlen(r.plan));
    free(kpath), free(ppath);
    return dir;
}

char *forward_plan_twin(const Plan *pl) {
    const Graph *g = pl->g;
    if (!g->source || access(g->source, R_OK) != 0)
        die("%s: its graph file %s cannot be read from here, so no forward plan can be made of it", pl->path,
            g->source ? g->source : "(none named)");
    Define *d = xcalloc((size_t)g->n_config + 1, sizeof *d);
    for (int k = 0; k < g->n_config; k++) {
        d[k].key = g->config[k].key;
        d[k].value = g->config[k].text ? xstrdup(g->config[k].text) : xasprintf("%.17g", g->config[k].value);
    }
    /* a policy file where the plan was made from one; a built-in policy by its name */
    const char *policy = g->policy.source && access(g->policy.source, R_OK) == 0 ? g->policy.source : g->policy.name;
    char *dir = forward_plan_compile(g->source, policy, d, g->n_config);
    for (int k = 0; k < g->n_config; k++) free(d[k].value);
    free(d);
    return dir;
}

void forward_plan_remove(const char *dir) {
    char *k = path_join(dir, "kernels.cu"), *p = path_join(dir, "plan");
    unlink(k), unlink(p), rmdir(dir);
    free(k), free(p);
}
