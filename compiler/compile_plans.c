/* compile_plans: the plans of a graph's folder compiled, and their one layout checked (see
 * compile_plans.h); plan_folder.c writes them. */
#include "compile_plans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* `given` (--policy, or what plan_remake passes back: a built-in's name, or a file's path)
 * is the policy the schedule names: the same name, the same file, or a file holding the
 * built-in's very text (a built-in's source, policies/NAME.lua, read from graphs/) */
static int same_policy(const char *given, const char *named) {
    if (!strcmp(given, named)) return 1;
    if (builtin_policy(given)) return 0;
    const char *builtin = builtin_policy(named);
    if (builtin) {
        char *text = try_read_file(given, NULL);
        int same = text && !strcmp(text, builtin);
        free(text);
        return same;
    }
    char *a = realpath(given, NULL), *b = realpath(named, NULL);
    int same = a && b && !strcmp(a, b);
    free(a), free(b);
    return same;
}

/* the graph compiled with `policy` (NULL: the options' own) and the training settings
 * `extra` after those of the options */
static CompileResult compile_with(const CompileOptions *opt, const char *policy, const Define *extra, int n_extra) {
    CompileOptions o = *opt;
    if (policy) o.front.policy_path = policy;
    Define *train = NULL;
    if (n_extra) {
        int n = opt->front.n_train_settings;
        train = xcalloc((size_t)(n + n_extra), sizeof *train);
        for (int i = 0; i < n; i++) train[i] = opt->front.train_settings[i];
        for (int i = 0; i < n_extra; i++) train[n + i] = extra[i];
        o.front.train_settings = train;
        o.front.n_train_settings = n + n_extra;
    }
    CompileResult r = compile_graph(&o);
    free(train); /* the graph keeps none of the options */
    return r;
}

/* The buffers the runtime hands from one plan to the next (plan_set.h) hold the same bytes
 * in the same places: `what` (phase K, or the fallback) against `ref`, the folder's own. */
static void check_layout(const CompileResult *ref, const char *ref_what, const CompileResult *r, const char *what,
                         const char *where) {
    static const int carried[] = {BUF_PARAMS, BUF_GRADS, BUF_ADAM_M, BUF_ADAM_V, BUF_STATE};
    const Graph *a = ref->g, *b = r->g;
    const char *pol = b->policy.name;
    const char *rule = strcmp(what, "the fallback") ? "every phase must keep the same parameter layout"
                                                    : "the fallback must keep the parameter layout of the plan it replaces";
    if (a->policy.master != b->policy.master)
        die_at(where, "%s (%s) keeps master weights in %s and %s in %s: %s", what, pol, dtype_name(b->policy.master),
               ref_what, dtype_name(a->policy.master), rule);
    if (a->n_params != b->n_params)
        die_at(where, "%s (%s) has %d parameters and %s %d: %s", what, pol, b->n_params, ref_what, a->n_params, rule);
    for (int i = 0; i < a->n_params; i++) {
        const Node *x = a->params[i].node, *y = b->params[i].node;
        if (strcmp(x->name, y->name))
            die_at(where, "%s (%s) has %s as parameter %d and %s %s: %s", what, pol, y->name, i + 1, ref_what, x->name, rule);
        if (!shape_eq(&x->shape, &y->shape)) {
            char *sx = shape_str(&x->shape), *sy = shape_str(&y->shape);
            die_at(where, "%s (%s) gives %s the shape %s and %s %s: %s", what, pol, y->name, sy, ref_what, sx, rule);
        }
        if (a->params[i].offset != b->params[i].offset)
            die_at(where, "%s (%s) puts %s at element %lld of the parameters and %s at %lld: %s", what, pol, y->name,
                   (long long)b->params[i].offset, ref_what, (long long)a->params[i].offset, rule);
    }
    for (size_t k = 0; k < sizeof carried / sizeof carried[0]; k++) {
        int buf = carried[k];
        if (ref->p->buffer_bytes[buf] != r->p->buffer_bytes[buf])
            die_at(where, "%s (%s) has a %s buffer of %lld bytes and %s one of %lld: %s", what, pol, buffer_name(buf),
                   (long long)r->p->buffer_bytes[buf], ref_what, (long long)ref->p->buffer_bytes[buf], rule);
    }
}

/* The fallback to a fixed scale keeps the policy and fixes its loss scaler at S, as
 * loss_scale = { fixed = S } does: which needs a scaler, and an S the settings allow. */
static void check_fixed_scale(const PrecisionSchedule *s, const CompileResult *main) {
    char d[32];
    fmt_double(d, s->to_scale);
    if (!main->g->train.loss_scaling)
        die_at(s->fallback_where, "fallback to a fixed scale needs a policy with a loss scaler: to = %s, and %s has none "
               "(loss_scaling = false)", d, main->g->policy.name);
    const TrainConfig *t = &main->g->train;
    char lim[32];
    if (t->scale_max > 0 && s->to_scale > t->scale_max)
        die_at(s->fallback_where, "fallback: to = %s, a fixed loss scale above loss_scale's max %s", d,
               fmt_double(lim, t->scale_max));
    if (s->to_scale < t->scale_min)
        die_at(s->fallback_where, "fallback: to = %s, a fixed loss scale below loss_scale's min %s", d,
               fmt_double(lim, t->scale_min));
    TrainConfig fixed = *t;
    fixed.scale_init = s->to_scale, fixed.scale_fixed = 1;
    char *err = train_settings_check(&fixed); /* what else the plan reader would refuse */
    if (err) die_at(s->fallback_where, "fallback: to = %s, a fixed loss scale: %s", d, err);
}

CompiledPlans compile_plans(const CompileOptions *opt) {
    CompiledPlans c = {0};
    /* the graph's own compile says whether there is a schedule; a graph without one, and a
     * forward-only plan, which trains nothing, is that one plan */
    CompileResult first = compile_graph(opt);
    const PrecisionSchedule *s = opt->forward_only ? NULL : first.g->train.precision;
    if (!s) {
        c.n_phases = 1;
        c.phase = xcalloc(1, sizeof *c.phase);
        c.phase[0] = first;
        return c;
    }
    c.schedule = s;
    c.n_phases = s->n_phases ? s->n_phases : 1;
    c.phase = xcalloc((size_t)c.n_phases, sizeof *c.phase);
    CompileResult *main = &c.phase[c.n_phases - 1];
    /* the folder's own plan: the last phase's policy (which --policy may only repeat), or
     * without a schedule the graph's as the options chose it */
    const char *main_policy = opt->front.policy_path;
    if (s->n_phases) {
        const char *last = s->phases[s->n_phases - 1].policy;
        if (main_policy && !same_policy(main_policy, last))
            die("the schedule of %s names the policies of its phases; leave --policy out", s->where);
        main_policy = last;
    }
    *main = s->n_phases ? compile_with(opt, main_policy, NULL, 0) : first;
    const char *ref_what = s->n_phases ? "the last phase" : "the plan";
    for (int k = 0; k + 1 < s->n_phases; k++) {
        c.phase[k] = compile_with(opt, s->phases[k].policy, NULL, 0);
        char what[32];
        snprintf(what, sizeof what, "phase %d", k + 1);
        if (!opt->dump_after) check_layout(main, ref_what, &c.phase[k], what, s->where);
    }
    if (s->has_fallback) {
        c.has_fallback = 1;
        if (s->to_policy) {
            c.fallback = compile_with(opt, s->to_policy, NULL, 0);
        } else {
            check_fixed_scale(s, main);
            char d[32];
            Define fixed[] = {{"scale_init", (char *)fmt_double(d, s->to_scale)}, {"scale_fixed", "1"}};
            c.fallback = compile_with(opt, main_policy, fixed, 2);
        }
        if (!opt->dump_after) check_layout(main, ref_what, &c.fallback, "the fallback", s->fallback_where);
    }
    return c;
}

/* the folder of plan k (0-based; the fallback is k = n_phases) as phases.json names it */
char *compiled_plan_dir(const CompiledPlans *c, int k) {
    if (k == c->n_phases) return xstrdup("fallback");
    if (k == c->n_phases - 1) return xstrdup(".");
    return xasprintf("phase%d", k + 1);
}

char *compiled_plans_dump(const CompiledPlans *c) {
    if (!c->schedule) return xstrdup(c->phase[0].report);
    StrBuf o = {0};
    for (int k = 0; k <= c->n_phases; k++) {
        const CompileResult *r = k < c->n_phases ? &c->phase[k] : c->has_fallback ? &c->fallback : NULL;
        if (!r) continue;
        char *dir = compiled_plan_dir(c, k);
        sb_printf(&o, "# plan %s (policy %s)\n%s", dir, r->g->policy.name, r->report ? r->report : "");
        free(dir);
    }
    return o.s;
}
