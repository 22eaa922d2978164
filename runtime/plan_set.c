/* plan_set: see plan_set.h. */
#include "plan_set.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The buffers a run carries from one plan to the next must be laid out alike. */
static void check_layout(const Plan *top, const Plan *p, const char *what) {
    static const int carried[] = {BUF_PARAMS, BUF_GRADS, BUF_ADAM_M, BUF_ADAM_V, BUF_STATE};
    const Graph *a = top->g, *b = p->g;
    int same = a->n_params == b->n_params && a->policy.master == b->policy.master;
    for (int i = 0; same && i < a->n_params; i++)
        same = a->params[i].offset == b->params[i].offset && shape_eq(&a->params[i].node->shape, &b->params[i].node->shape) &&
               !strcmp(a->params[i].node->name, b->params[i].node->name);
    for (size_t k = 0; same && k < sizeof carried / sizeof carried[0]; k++)
        same = top->p->buffer_bytes[carried[k]] == p->p->buffer_bytes[carried[k]];
    if (!same)
        die("%s: %s (%s) lays out its parameters, gradients or optimizer state otherwise than %s (%s): the plans of one "
            "run must share them; compile the graph again",
            p->path, what, b->policy.name, top->path, a->policy.name);
    const Node *ta = a->role[ROLE_TOKENS], *tb = b->role[ROLE_TOKENS], *ya = a->role[ROLE_TARGETS], *yb = b->role[ROLE_TARGETS];
    if (!ta || !tb || !ya || !yb || ta->offset != tb->offset || ya->offset != yb->offset || a->loss->dtype != b->loss->dtype)
        die("%s: %s takes its batches or gives its loss otherwise than %s: compile the graph again", p->path, what, top->path);
    if (a->train.accumulation != b->train.accumulation)
        die("%s: %s takes %d micro-batches an update, %s %d: compile the graph again", p->path, what, b->train.accumulation,
            top->path, a->train.accumulation);
}

static Plan *load_member(Plan *top, const char *dir_name, const char *what) {
    if (!strcmp(dir_name, ".")) return top;
    char *base = path_dirname(top->path), *dir = path_join(base, dir_name);
    Plan *p = plan_load(dir);
    check_layout(top, p, what);
    free(p->g->hash);
    p->g->hash = xstrdup(top->g->hash); /* checkpoints are of the run (plan_set.h) */
    free(base), free(dir);
    return p;
}

static MMC_NORETURN void bad(const char *path, const char *what) {
    die("%s: %s: compile the graph again", path, what);
}

PlanSet *planset_load(Plan *top) {
    PlanSet *s = xcalloc(1, sizeof *s);
    char *base = path_dirname(top->path), *path = path_join(base, "phases.json");
    free(base);
    if (access(path, F_OK) != 0) {
        s->n_phases = 1;
        s->phase = xcalloc(1, sizeof *s->phase);
        s->first = xcalloc(1, sizeof *s->first);
        s->phase[0] = top;
        free(path);
        return s;
    }
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) die("%s:%d: %s", path, err.line, err.text);
    json_t *phases = json_object_get(root, "phases"), *fb = json_object_get(root, "fallback");
    if (!json_is_array(phases) || json_array_size(phases) < 1) bad(path, "no list of phases");
    s->n_phases = (int)json_array_size(phases);
    s->phase = xcalloc((size_t)s->n_phases, sizeof *s->phase);
    s->first = xcalloc((size_t)s->n_phases, sizeof *s->first);
    int64_t at = 0;
    for (int k = 0; k < s->n_phases; k++) {
        json_t *ph = json_array_get(phases, (size_t)k), *dir = json_object_get(ph, "dir"), *n = json_object_get(ph, "updates");
        int last = k == s->n_phases - 1;
        if (!json_is_string(dir) || (last ? strcmp(json_string_value(dir), ".") != 0 : !json_is_integer(n) || json_integer_value(n) < 1))
            bad(path, "a phase without its folder or its updates (the last phase is the folder's own plan)");
        char what[32];
        snprintf(what, sizeof what, "phase %d", k + 1);
        s->phase[k] = load_member(top, json_string_value(dir), what);
        s->first[k] = at;
        if (!last) at += json_integer_value(n);
    }
    if (fb) {
        json_t *dir = json_object_get(fb, "dir"), *rate = json_object_get(fb, "overflow_rate"),
               *window = json_object_get(fb, "window"), *min = json_object_get(fb, "min_scale"),
               *pol = json_object_get(fb, "policy"), *scale = json_object_get(fb, "scale");
        if (!json_is_string(dir) || !json_is_number(rate) || !json_is_integer(window) || !json_is_number(min) ||
            !json_is_string(pol) || !json_is_number(scale))
            bad(path, "a fallback without dir, overflow_rate, window, min_scale, policy and scale");
        s->fallback = load_member(top, json_string_value(dir), "the fallback");
        s->overflow_rate = json_number_value(rate);
        s->window = json_integer_value(window);
        s->min_scale = json_number_value(min);
        double fixed = json_number_value(scale);
        s->fallback_what = fixed > 0 ? xasprintf("%s with a fixed loss scale of %g", json_string_value(pol), fixed)
                                     : xstrdup(json_string_value(pol));
        if (s->overflow_rate > 0 && s->window < 1) bad(path, "a fallback overflow rate without a window");
    }
    json_decref(root);
    free(path);
    return s;
}

int planset_phase_of(const PlanSet *s, int64_t u) {
    int k = 0;
    while (k + 1 < s->n_phases && u >= s->first[k + 1]) k++;
    return k;
}

void planset_free(PlanSet *s) {
    free(s->phase), free(s->first), free(s->fallback_what), free(s);
}
