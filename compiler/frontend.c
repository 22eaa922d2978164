/* frontend: the graph DSL (see frontend.h and README "The graph file"). */
#include "frontend.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "op_rules.h"
#include "util.h"

typedef struct Front {
    Graph *g;
    const FrontendOptions *opt;
    int *define_used;
    int config_seen;
    int policy_set;      /* a policy was loaded (by --policy or `precision`) */
    int in_policy_file;  /* rules made now belong to the policy, below the graph's own */
    int n_policy_rules, n_graph_rules;
    Sha256 hash;         /* over every source text the graph depends on */
} Front;

static Front *front_of(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, "mmc.front");
    Front *f = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return f;
}

/* The Lua line that called the DSL function: "graphs/minimind.lua:42" from a file's own code,
 * and from inside a helper function the line of the file that called the helper, with the
 * helper and the line in it: "graphs/minimind.lua:44 (in proj, :29)" (the file is named
 * there too when the helper lives in another one). */
static char *where_of(lua_State *L) {
    lua_Debug at, up;
    if (!lua_getstack(L, 1, &at) || !lua_getinfo(L, "Sln", &at) || at.currentline < 0) return xstrdup("?");
    if (!strcmp(at.what, "main")) return xasprintf("%s:%d", at.short_src, at.currentline);
    for (int level = 2; lua_getstack(L, level, &up); level++) {
        if (!lua_getinfo(L, "Sl", &up) || strcmp(up.what, "main") || up.currentline < 0) continue;
        char *fn = at.name ? xstrdup(at.name) : xasprintf("the function of line %d", at.linedefined);
        char *s = strcmp(at.short_src, up.short_src)
                      ? xasprintf("%s:%d (in %s, %s:%d)", up.short_src, up.currentline, fn, at.short_src, at.currentline)
                      : xasprintf("%s:%d (in %s, :%d)", up.short_src, up.currentline, fn, at.currentline);
        free(fn);
        return s;
    }
    return xasprintf("%s:%d", at.short_src, at.currentline);
}

/* ---- nodes as Lua values */

static void push_node(lua_State *L, Node *n) {
    Node **u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = n;
    luaL_setmetatable(L, "mmc.node");
}

static Node *check_node(lua_State *L, int idx, const char *fn, const char *what) {
    Node **u = luaL_testudata(L, idx, "mmc.node");
    if (!u) luaL_error(L, "%s: %s must be a tensor, got %s", fn, what, luaL_typename(L, idx));
    return *u;
}

static int node_tostring(lua_State *L) {
    Node *n = check_node(L, 1, "tostring", "value");
    char *s = shape_str(&n->shape);
    lua_pushfstring(L, "%s(%s %s)", op_info[n->op].name, node_label(n), s);
    free(s);
    return 1;
}

/* Finishes a node made by a DSL call: runs the shape rule and reports its error at the node's
 * place (the helper's caller too, see where_of). */
static Node *finish(lua_State *L, Node *n) {
    char *err = ir_infer_shape(n);
    if (err) {
        lua_pushfstring(L, "%s: %s", n->where, err);
        free(err);
        lua_error(L);
    }
    push_node(L, n);
    return n;
}

static Shape check_shape(lua_State *L, int idx, const char *fn) {
    luaL_checktype(L, idx, LUA_TTABLE);
    Shape s = {0};
    s.rank = (int)luaL_len(L, idx);
    if (s.rank > IR_MAX_DIMS) luaL_error(L, "%s: at most %d dims", fn, IR_MAX_DIMS);
    for (int i = 0; i < s.rank; i++) {
        lua_geti(L, idx, i + 1);
        int ok;
        lua_Integer d = lua_tointegerx(L, -1, &ok);
        if (!ok || d <= 0) luaL_error(L, "%s: dim %d must be a positive integer", fn, i + 1);
        s.dim[i] = d;
        lua_pop(L, 1);
    }
    return s;
}

/* Option tables: every key must be known, so a typo is an error, not a silent default. */
static void check_options(lua_State *L, int idx, const char *fn, const char *const *known) {
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int ok = 0;
        for (int i = 0; k && known[i]; i++)
            if (strcmp(k, known[i]) == 0) ok = 1;
        if (!ok) {
            StrBuf b = {0};
            for (int i = 0; known[i]; i++) sb_printf(&b, "%s%s", i ? ", " : "", known[i]);
            luaL_error(L, "%s: unknown option '%s' (known: %s)", fn, k ? k : "?", b.s ? b.s : "none");
        }
        lua_pop(L, 1);
    }
}

static int opt_int(lua_State *L, int idx, const char *key, int fallback) {
    if (lua_isnoneornil(L, idx)) return fallback;
    lua_getfield(L, idx, key);
    int ok, v = fallback;
    if (!lua_isnil(L, -1)) {
        v = (int)lua_tointegerx(L, -1, &ok);
        if (!ok) luaL_error(L, "option '%s' must be an integer", key);
    }
    lua_pop(L, 1);
    return v;
}

static int opt_bool(lua_State *L, int idx, const char *key, int fallback) {
    if (lua_isnoneornil(L, idx)) return fallback;
    lua_getfield(L, idx, key);
    int v = lua_isnil(L, -1) ? fallback : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static void opt_name(lua_State *L, int idx, Node *n) {
    if (lua_isnoneornil(L, idx)) return;
    lua_getfield(L, idx, "name");
    if (!lua_isnil(L, -1)) n->name = xstrdup(luaL_checkstring(L, -1));
    lua_pop(L, 1);
}

static Node *make(lua_State *L, Op op, int n_in, Node **in) {
    Front *f = front_of(L);
    char *w = where_of(L);
    Node *n = ir_node(f->g, op, n_in, in, w);
    free(w);
    return n;
}

/* ---- config, inputs, parameters, constants */

/* defaults { key = value }: values that an including file gives the config{} of the file it
 * includes (tiny.lua sets small sizes for minimind.lua's architecture). -D still wins. */
static int l_defaults(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, LUA_REGISTRYINDEX, "mmc.defaults");
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, 2);
    }
    return 0;
}

static int l_config(lua_State *L) {
    Front *f = front_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    if (f->config_seen) return luaL_error(L, "config: called twice");
    f->config_seen = 1;
    lua_getfield(L, LUA_REGISTRYINDEX, "mmc.defaults");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        lua_gettable(L, 1);
        if (lua_isnil(L, -1)) {
            const char *k = lua_tostring(L, -3);
            return luaL_error(L, "defaults: '%s' is not a config key of this file", k ? k : "?");
        }
        lua_pop(L, 1);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, 1);
    }
    lua_pop(L, 1);
    for (int i = 0; i < f->opt->n_defines; i++) {
        const Define *d = &f->opt->defines[i];
        lua_getfield(L, 1, d->key);
        int known = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (!known) continue; /* reported after the file ran: -D names an unknown key */
        f->define_used[i] = 1;
        char *end;
        double v = strtod(d->value, &end);
        if (*end == 0 && end != d->value) {
            if (v == floor(v) && fabs(v) < 9e15) lua_pushinteger(L, (lua_Integer)v);
            else lua_pushnumber(L, v);
        } else {
            lua_pushstring(L, d->value);
        }
        lua_setfield(L, 1, d->key);
    }
    /* record the final values, sorted by key so the plan does not depend on table order */
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "config: keys must be names");
        ConfigEntry e = {xstrdup(lua_tostring(L, -2)), 0, NULL};
        if (lua_type(L, -1) == LUA_TNUMBER) e.value = lua_tonumber(L, -1);
        else if (lua_type(L, -1) == LUA_TSTRING) e.text = xstrdup(lua_tostring(L, -1));
        else if (lua_type(L, -1) == LUA_TBOOLEAN) e.value = lua_toboolean(L, -1);
        else luaL_error(L, "config: '%s' must be a number, string or boolean", e.key);
        vec_push(f->g->config, f->g->n_config, f->g->cap_config, e);
        lua_pop(L, 1);
    }
    for (int i = 1; i < f->g->n_config; i++)
        for (int j = i; j > 0 && strcmp(f->g->config[j - 1].key, f->g->config[j].key) > 0; j--) {
            ConfigEntry t = f->g->config[j];
            f->g->config[j] = f->g->config[j - 1];
            f->g->config[j - 1] = t;
        }
    lua_pushvalue(L, 1);
    return 1;
}

static int l_input(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    Shape s = check_shape(L, 2, "input");
    DType t = dtype_parse(luaL_optstring(L, 3, "f32"));
    if (t == DT_NONE) return luaL_error(L, "input: unknown dtype '%s'", lua_tostring(L, 3));
    Node *n = make(L, OP_INPUT, 0, NULL);
    n->name = xstrdup(name);
    n->shape = s;
    n->dtype = n->compute = t;
    push_node(L, n);
    return 1;
}

/* Initialisers are strings the runtime interprets: "normal(mean,std)", "uniform(lo,hi)",
 * "fan_in" (torch.nn.Linear's default: uniform(+-1/sqrt(in_features))), "ones", "zeros". */
static int check_init(const char *s) {
    double a, b;
    char tail;
    if (!strcmp(s, "ones") || !strcmp(s, "zeros") || !strcmp(s, "fan_in")) return 1;
    if (sscanf(s, "normal(%lf,%lf)%c", &a, &b, &tail) == 2 && b >= 0) return 1;
    if (sscanf(s, "uniform(%lf,%lf)%c", &a, &b, &tail) == 2 && a <= b) return 1;
    return 0;
}

static int l_param(lua_State *L) {
    Front *f = front_of(L);
    const char *name = luaL_checkstring(L, 1);
    Shape s = check_shape(L, 2, "param");
    const char *init = luaL_optstring(L, 3, "fan_in");
    if (!check_init(init))
        return luaL_error(L, "param %s: bad init '%s' (ones, zeros, fan_in, normal(m,s), uniform(a,b))", name, init);
    for (int i = 0; i < f->g->n_params; i++)
        if (strcmp(f->g->params[i].node->name, name) == 0)
            return luaL_error(L, "param %s: declared twice (first at %s)", name, f->g->params[i].node->where);
    Node *n = make(L, OP_PARAM, 0, NULL);
    n->name = xstrdup(name);
    n->shape = s;
    n->dtype = n->compute = DT_F32; /* set to the policy's master dtype once it is known */
    n->a.init = xstrdup(init);
    n->param_index = f->g->n_params;
    Param p = {n, 0, NULL};
    vec_push(f->g->params, f->g->n_params, f->g->cap_params, p);
    push_node(L, n);
    return 1;
}

static int l_init_normal(lua_State *L) {
    luaL_checknumber(L, 1);
    luaL_checknumber(L, 2);
    lua_pushfstring(L, "normal(%s,%s)", lua_tostring(L, 1), lua_tostring(L, 2));
    return 1;
}

static int l_init_uniform(lua_State *L) {
    luaL_checknumber(L, 1);
    luaL_checknumber(L, 2);
    lua_pushfstring(L, "uniform(%s,%s)", lua_tostring(L, 1), lua_tostring(L, 2));
    return 1;
}

/* rope_tables(seq, head_dim, theta) -> cos, sin: [seq, head_dim] f32, as MiniMind's
 * precompute_freqs_cis (the two halves repeat: cat([cos(f), cos(f)])). */
static int l_rope_tables(lua_State *L) {
    lua_Integer seq = luaL_checkinteger(L, 1), hd = luaL_checkinteger(L, 2);
    double theta = luaL_checknumber(L, 3);
    if (seq <= 0 || hd <= 0 || hd % 2) return luaL_error(L, "rope_tables: seq > 0 and an even head_dim > 0");
    const char *which[2] = {"rope_cos", "rope_sin"};
    for (int i = 0; i < 2; i++) {
        Node *n = make(L, OP_CONST, 0, NULL);
        n->name = xasprintf("%s", which[i]);
        n->shape = shape_make(2, (int64_t)seq, (int64_t)hd);
        n->dtype = n->compute = DT_F32;
        n->a.gen = xasprintf("%s(%lld,%lld,%.17g)", which[i], (long long)seq, (long long)hd, theta);
        push_node(L, n);
    }
    return 2;
}

/* ---- ops */

static const char *const only_name[] = {"name", NULL};

static int l_unary(lua_State *L, Op op) {
    Node *x = check_node(L, 1, op_info[op].name, "x");
    check_options(L, 2, op_info[op].name, only_name);
    Node *n = make(L, op, 1, &x);
    opt_name(L, 2, n);
    finish(L, n);
    return 1;
}

static int l_binary(lua_State *L, Op op) {
    Node *in[2] = {check_node(L, 1, op_info[op].name, "first input"), check_node(L, 2, op_info[op].name, "second input")};
    check_options(L, 3, op_info[op].name, only_name);
    Node *n = make(L, op, 2, in);
    opt_name(L, 3, n);
    finish(L, n);
    return 1;
}

static int l_add(lua_State *L) { return l_binary(L, OP_ADD); }
static int l_add_(lua_State *L) { return l_binary(L, OP_ADD_); }
static int l_mul(lua_State *L) { return l_binary(L, OP_MUL); }
static int l_type_as(lua_State *L) { return l_binary(L, OP_TYPE_AS); }
static int l_silu(lua_State *L) { return l_unary(L, OP_SILU); }
static int l_sum_all(lua_State *L) { return l_unary(L, OP_SUM_ALL); }

static int l_cast(lua_State *L) {
    Node *x = check_node(L, 1, "cast", "x");
    const char *to = luaL_checkstring(L, 2);
    DType t = dtype_parse(to);
    if (!dtype_is_float(t)) return luaL_error(L, "cast: unknown float dtype '%s' (f16, bf16, f32, f64)", to);
    check_options(L, 3, "cast", only_name);
    Node *n = make(L, OP_CAST, 1, &x);
    n->a.to = t;
    n->explicit_cast = 1;
    opt_name(L, 3, n);
    finish(L, n);
    return 1;
}

/* op(x, number, { name = ... }): the number goes to *field of the node's attributes */
static int l_unary_number(lua_State *L, Op op, size_t field) {
    Node *x = check_node(L, 1, op_info[op].name, "x");
    double c = luaL_checknumber(L, 2);
    check_options(L, 3, op_info[op].name, only_name);
    Node *n = make(L, op, 1, &x);
    *(double *)((char *)&n->a + field) = c;
    opt_name(L, 3, n);
    finish(L, n);
    return 1;
}

static int l_scale(lua_State *L) { return l_unary_number(L, OP_SCALE, offsetof(Attrs, scale)); }
static int l_rms_normalize(lua_State *L) { return l_unary_number(L, OP_RMS_NORMALIZE, offsetof(Attrs, eps)); }

static int l_linear(lua_State *L) {
    Node *in[2] = {check_node(L, 1, "linear", "x"), check_node(L, 2, "linear", "weight")};
    check_options(L, 3, "linear", only_name);
    Node *n = make(L, OP_LINEAR, 2, in);
    /* named after its weight unless told otherwise: model.layers.0.self_attn.q_proj */
    const char *wn = in[1]->name;
    size_t len = wn ? strlen(wn) : 0;
    if (wn && len > 7 && strcmp(wn + len - 7, ".weight") == 0) n->name = xstrndup(wn, len - 7);
    opt_name(L, 3, n);
    finish(L, n);
    return 1;
}

static int l_embedding(lua_State *L) { return l_binary(L, OP_EMBEDDING); }

static int l_rope(lua_State *L) {
    static const char *const known[] = {"heads", "name", NULL};
    Node *in[3] = {check_node(L, 1, "rope", "x"), check_node(L, 2, "rope", "cos"), check_node(L, 3, "rope", "sin")};
    check_options(L, 4, "rope", known);
    Node *n = make(L, OP_ROPE, 3, in);
    n->a.heads = opt_int(L, 4, "heads", 0);
    opt_name(L, 4, n);
    finish(L, n);
    return 1;
}

static int l_attention(lua_State *L) {
    static const char *const known[] = {"heads", "kv_heads", "causal", "name", NULL};
    Node *in[3] = {check_node(L, 1, "attention", "q"), check_node(L, 2, "attention", "k"),
                   check_node(L, 3, "attention", "v")};
    check_options(L, 4, "attention", known);
    Node *n = make(L, OP_ATTENTION, 3, in);
    n->a.heads = opt_int(L, 4, "heads", 0);
    n->a.kv_heads = opt_int(L, 4, "kv_heads", n->a.heads);
    n->a.causal = opt_bool(L, 4, "causal", 1);
    opt_name(L, 4, n);
    finish(L, n);
    return 1;
}

static int l_cross_entropy(lua_State *L) {
    static const char *const known[] = {"ignore", "name", NULL};
    Node *in[2] = {check_node(L, 1, "cross_entropy", "logits"), check_node(L, 2, "cross_entropy", "labels")};
    check_options(L, 3, "cross_entropy", known);
    Node *n = make(L, OP_CROSS_ENTROPY, 2, in);
    n->a.ignore_index = opt_int(L, 3, "ignore", -100);
    opt_name(L, 3, n);
    finish(L, n);
    return 1;
}

/* tie("lm_head.weight", embed): the parameter also goes by this state-dict name, so
 * checkpoints carry both keys, as MiniMind's tied state dict does. */
static int l_tie(lua_State *L) {
    Front *f = front_of(L);
    const char *alias = luaL_checkstring(L, 1);
    Node *n = check_node(L, 2, "tie", "parameter");
    if (n->op != OP_PARAM) return luaL_error(L, "tie: %s is not a parameter", node_label(n));
    for (int i = 0; i < f->g->n_params; i++)
        if (!strcmp(f->g->params[i].node->name, alias) || (f->g->params[i].alias && !strcmp(f->g->params[i].alias, alias)))
            return luaL_error(L, "tie: the name %s is taken", alias);
    Param *p = &f->g->params[n->param_index];
    if (p->alias) return luaL_error(L, "tie: %s already has the second name %s", n->name, p->alias);
    p->alias = xstrdup(alias);
    lua_settop(L, 2);
    return 1;
}

static int l_named(lua_State *L) {
    Node *n = check_node(L, 1, "named", "x");
    free(n->name);
    n->name = xstrdup(luaL_checkstring(L, 2));
    lua_settop(L, 1);
    return 1;
}

static int l_shape(lua_State *L) {
    Node *n = check_node(L, 1, "shape", "x");
    lua_createtable(L, n->shape.rank, 0);
    for (int i = 0; i < n->shape.rank; i++) {
        lua_pushinteger(L, n->shape.dim[i]);
        lua_seti(L, -2, i + 1);
    }
    return 1;
}

static int l_loss(lua_State *L) {
    Front *f = front_of(L);
    Node *n = check_node(L, 1, "loss", "value");
    if (n->shape.rank != 0) {
        char *s = shape_str(&n->shape);
        return luaL_error(L, "loss: must be a scalar, got %s %s", node_label(n), s);
    }
    if (f->g->loss) return luaL_error(L, "loss: set twice (first at %s)", f->g->loss->where);
    f->g->loss = n;
    lua_settop(L, 1);
    return 1;
}

/* ---- precision policies */

static const char *const compute_words[] = {"f16", "bf16", "f32", "f64", "follow", "promote", NULL};

static int l_rule(lua_State *L) {
    static const char *const known[] = {"op", "class", "name", "compute", "priority", NULL};
    Front *f = front_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    check_options(L, 1, "rule", known);
    Rule r = {0};
    r.where = where_of(L);
    lua_getfield(L, 1, "op");
    if (!lua_isnil(L, -1)) {
        r.op = xstrdup(luaL_checkstring(L, -1));
        if (op_parse(r.op) == OP_COUNT) return luaL_error(L, "rule: unknown op '%s'", r.op);
    }
    lua_getfield(L, 1, "class");
    if (!lua_isnil(L, -1)) {
        r.cls = xstrdup(luaL_checkstring(L, -1));
        PrecClass c = prec_class_parse(r.cls);
        if (c == PC_COUNT || c == PC_NONE)
            return luaL_error(L, "rule: unknown class '%s' (lower_precision, fp32, follow)", r.cls);
    }
    lua_getfield(L, 1, "name");
    if (!lua_isnil(L, -1)) r.name = xstrdup(luaL_checkstring(L, -1));
    lua_getfield(L, 1, "compute");
    if (lua_isnil(L, -1)) return luaL_error(L, "rule: needs compute = f16|bf16|f32|f64|follow|promote");
    r.compute = xstrdup(luaL_checkstring(L, -1));
    int ok = 0;
    for (int i = 0; compute_words[i]; i++) ok |= strcmp(compute_words[i], r.compute) == 0;
    if (!ok) return luaL_error(L, "rule: unknown compute '%s' (f16, bf16, f32, f64, follow, promote)", r.compute);
    if (!r.op && !r.cls && !r.name) return luaL_error(L, "rule: needs op, class or name to match");
    lua_getfield(L, 1, "priority");
    r.priority = lua_isnil(L, -1) ? 0 : (int)luaL_checkinteger(L, -1);
    lua_pop(L, 5);
    r.order = f->in_policy_file ? f->n_policy_rules++ : 100000 + f->n_graph_rules++;
    Policy *p = &f->g->policy;
    vec_push(p->rules, p->n_rules, p->cap_rules, r);
    return 0;
}

static int l_policy(lua_State *L) {
    static const char *const known[] = {"name", "rounding", "master", "loss_scaling", "at_least", NULL};
    Front *f = front_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    /* rules inside the table were registered by their own rule{} calls; skip array items */
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -1);
            int ok = 0;
            for (int i = 0; known[i]; i++) ok |= strcmp(k, known[i]) == 0;
            if (!ok) return luaL_error(L, "policy: unknown field '%s' (name, rounding, master, loss_scaling, at_least)", k);
        }
    }
    Policy *p = &f->g->policy;
    lua_getfield(L, 1, "name");
    free(p->name);
    p->name = xstrdup(luaL_optstring(L, -1, "custom"));
    lua_getfield(L, 1, "rounding");
    const char *rounding = luaL_optstring(L, -1, "eager");
    if (strcmp(rounding, "eager") == 0) p->round_eager = 1;
    else if (strcmp(rounding, "fused") == 0) p->round_eager = 0;
    else return luaL_error(L, "policy: rounding must be \"eager\" or \"fused\", got '%s'", rounding);
    lua_getfield(L, 1, "master");
    DType m = dtype_parse(luaL_optstring(L, -1, "f32"));
    if (m != DT_F32 && m != DT_F64) return luaL_error(L, "policy: master must be f32 or f64");
    p->master = m;
    lua_getfield(L, 1, "loss_scaling");
    f->g->train.loss_scaling = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
    lua_getfield(L, 1, "at_least");
    p->at_least = DT_NONE;
    if (!lua_isnil(L, -1)) {
        p->at_least = dtype_parse(luaL_checkstring(L, -1));
        if (!dtype_is_float(p->at_least)) return luaL_error(L, "policy: at_least must be a float dtype");
    }
    lua_pop(L, 5);
    return 0;
}

static void run_chunk(lua_State *L, const char *text, size_t len, const char *chunkname);

/* include "file.lua": runs another graph file in this one's environment (path relative to the
 * including file), so a variant can reuse an architecture. */
static int l_include(lua_State *L) {
    Front *f = front_of(L);
    const char *rel = luaL_checkstring(L, 1);
    lua_Debug ar;
    char *dir = NULL;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "S", &ar) && ar.source[0] == '@') dir = path_dirname(ar.source + 1);
    char *path = path_join(dir ? dir : ".", rel);
    free(dir);
    size_t len;
    char *text = try_read_file(path, &len);
    if (!text) return luaL_error(L, "include: cannot open %s", path);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    run_chunk(L, text, len, path);
    free(text);
    free(path);
    return 0;
}

static void load_policy(lua_State *L, const char *spec, const char *relative_to) {
    Front *f = front_of(L);
    /* drop rules of a policy loaded before: the later choice replaces it */
    Policy *p = &f->g->policy;
    int k = 0;
    for (int i = 0; i < p->n_rules; i++)
        if (p->rules[i].order >= 100000) p->rules[k++] = p->rules[i];
    p->n_rules = k;
    f->n_policy_rules = 0;
    const char *text = builtin_policy(spec);
    char *path = NULL, *owned = NULL;
    size_t len;
    if (text) {
        path = xasprintf("policies/%s.lua", spec);
        len = strlen(text);
    } else {
        path = relative_to ? path_join(relative_to, spec) : xstrdup(spec);
        owned = try_read_file(path, &len);
        if (!owned) luaL_error(L, "precision: no built-in policy '%s' (%s) and no file %s", spec, builtin_policy_names(), path);
        text = owned;
    }
    free(p->source);
    p->source = xstrdup(path);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    f->in_policy_file = 1;
    run_chunk(L, text, len, path);
    f->in_policy_file = 0;
    if (!p->name) luaL_error(L, "%s: a policy file must call policy { name = ... }", path);
    f->policy_set = 1;
    free(owned);
    free(path);
}

static int l_precision(lua_State *L) {
    Front *f = front_of(L);
    const char *spec = luaL_checkstring(L, 1);
    if (f->opt->policy_path) return 0; /* --policy overrides the graph's choice */
    char *dir = path_dirname(f->opt->graph_path);
    load_policy(L, spec, dir);
    free(dir);
    return 0;
}

/* ---- training settings */

static double field_num(lua_State *L, int idx, const char *key, double fallback) {
    lua_getfield(L, idx, key);
    double v = lua_isnil(L, -1) ? fallback : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static int l_adamw(lua_State *L) {
    static const char *const known[] = {"lr", "betas", "eps", "weight_decay", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    check_options(L, 1, "adamw", known);
    lua_pushvalue(L, 1);
    lua_pushstring(L, "adamw");
    lua_setfield(L, -2, "kind");
    return 1;
}

static int l_train(lua_State *L) {
    static const char *const known[] = {"optimizer", "schedule", "warmup", "clip", "loss_scale", "accumulation",
                                        "epochs", "log_interval", NULL};
    static const char *const scale_known[] = {"init", "growth", "backoff", "interval", NULL};
    Front *f = front_of(L);
    TrainConfig *t = &f->g->train;
    luaL_checktype(L, 1, LUA_TTABLE);
    check_options(L, 1, "train", known);
    free(t->where);
    t->where = where_of(L);
    lua_getfield(L, 1, "optimizer");
    if (!lua_isnil(L, -1)) {
        int o = lua_gettop(L);
        lua_getfield(L, o, "kind");
        if (!lua_isstring(L, -1) || strcmp(lua_tostring(L, -1), "adamw") != 0)
            return luaL_error(L, "train: optimizer must be adamw { ... }");
        lua_pop(L, 1);
        t->lr = field_num(L, o, "lr", t->lr);
        t->eps = field_num(L, o, "eps", t->eps);
        t->weight_decay = field_num(L, o, "weight_decay", t->weight_decay);
        lua_getfield(L, o, "betas");
        if (!lua_isnil(L, -1)) {
            luaL_checktype(L, -1, LUA_TTABLE);
            lua_geti(L, -1, 1);
            lua_geti(L, -2, 2);
            t->beta1 = luaL_checknumber(L, -2);
            t->beta2 = luaL_checknumber(L, -1);
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "schedule");
    if (!lua_isnil(L, -1)) {
        const char *s = luaL_checkstring(L, -1);
        if (strcmp(s, "minimind_cosine") && strcmp(s, "constant"))
            return luaL_error(L, "train: schedule must be \"minimind_cosine\" or \"constant\", got '%s'", s);
        free(t->schedule);
        t->schedule = xstrdup(s);
    }
    lua_pop(L, 1);
    t->clip = field_num(L, 1, "clip", t->clip);
    t->warmup = (int)field_num(L, 1, "warmup", t->warmup);
    if (t->warmup < 0) return luaL_error(L, "train: warmup must be >= 0 (updates; 0: none)");
    t->accumulation = (int)field_num(L, 1, "accumulation", t->accumulation);
    t->epochs = (int)field_num(L, 1, "epochs", t->epochs);
    t->log_interval = (int)field_num(L, 1, "log_interval", t->log_interval);
    if (t->accumulation < 1) return luaL_error(L, "train: accumulation must be >= 1");
    if (t->clip < 0) return luaL_error(L, "train: clip must be >= 0 (0 disables clipping)");
    lua_getfield(L, 1, "loss_scale");
    if (lua_istable(L, -1)) {
        int s = lua_gettop(L);
        check_options(L, s, "loss_scale", scale_known);
        t->scale_init = field_num(L, s, "init", t->scale_init);
        t->scale_growth = field_num(L, s, "growth", t->scale_growth);
        t->scale_backoff = field_num(L, s, "backoff", t->scale_backoff);
        t->scale_interval = (int)field_num(L, s, "interval", t->scale_interval);
        if (t->scale_init <= 0 || t->scale_growth < 1 || t->scale_backoff <= 0 || t->scale_backoff > 1 ||
            t->scale_interval < 1)
            return luaL_error(L, "loss_scale: need init > 0, growth >= 1, 0 < backoff <= 1, interval >= 1");
    } else if (!lua_isnil(L, -1)) {
        return luaL_error(L, "train: loss_scale must be a table { init, growth, backoff, interval }");
    }
    lua_pop(L, 1);
    return 0;
}

/* ---- the environment */

static int l_unknown_global(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "unknown op or DSL function '%s' (see README, \"The graph file\")", k ? k : "?");
}

static void run_chunk(lua_State *L, const char *text, size_t len, const char *chunkname) {
    char *name = xasprintf("@%s", chunkname);
    if (luaL_loadbufferx(L, text, len, name, "t") != LUA_OK) lua_error(L);
    free(name);
    lua_call(L, 0, 0);
}

static const luaL_Reg dsl[] = {
    {"config", l_config},       {"input", l_input},
    {"param", l_param},         {"rope_tables", l_rope_tables},
    {"embedding", l_embedding}, {"linear", l_linear},
    {"rms_normalize", l_rms_normalize},
    {"cast", l_cast},           {"type_as", l_type_as},
    {"add", l_add},             {"add_", l_add_},
    {"mul", l_mul},             {"scale", l_scale},
    {"silu", l_silu},           {"rope", l_rope},
    {"attention", l_attention}, {"cross_entropy", l_cross_entropy},
    {"sum_all", l_sum_all},     {"named", l_named},
    {"shape", l_shape},         {"loss", l_loss},
    {"rule", l_rule},           {"policy", l_policy},
    {"precision", l_precision}, {"adamw", l_adamw},
    {"train", l_train},         {"defaults", l_defaults},
    {"include", l_include},     {"tie", l_tie},
    {NULL, NULL},
};

static void open_env(lua_State *L) {
    /* only the harmless parts of the standard library: a graph file describes, it does not act */
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    lua_pop(L, 4);
    static const char *const unsafe[] = {"dofile", "loadfile", "load", "require", "collectgarbage", NULL};
    for (int i = 0; unsafe[i]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, unsafe[i]);
    }
    luaL_newmetatable(L, "mmc.node");
    lua_pushcfunction(L, node_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    lua_pushglobaltable(L);
    luaL_setfuncs(L, dsl, 0);
    lua_newtable(L); /* init */
    lua_pushcfunction(L, l_init_normal);
    lua_setfield(L, -2, "normal");
    lua_pushcfunction(L, l_init_uniform);
    lua_setfield(L, -2, "uniform");
    lua_pushstring(L, "ones");
    lua_setfield(L, -2, "ones");
    lua_pushstring(L, "zeros");
    lua_setfield(L, -2, "zeros");
    lua_pushstring(L, "fan_in");
    lua_setfield(L, -2, "fan_in");
    lua_setfield(L, -2, "init");
    lua_newtable(L); /* metatable of _G: reading an unknown global is an error */
    lua_pushcfunction(L, l_unknown_global);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

static void train_defaults(TrainConfig *t) {
    /* torch.optim.AdamW defaults with MiniMind's lr; GradScaler defaults; MiniMind's clip */
    t->lr = 5e-4, t->beta1 = 0.9, t->beta2 = 0.999, t->eps = 1e-8, t->weight_decay = 0.01;
    t->schedule = xstrdup("minimind_cosine");
    t->clip = 1.0;
    t->loss_scaling = 1;
    t->scale_init = 65536.0, t->scale_growth = 2.0, t->scale_backoff = 0.5, t->scale_interval = 2000;
    t->accumulation = 1, t->epochs = 1, t->log_interval = 100;
}

static int protected_load(lua_State *L) {
    Front *f = lua_touserdata(L, 1);
    const FrontendOptions *opt = f->opt;
    lua_pushlightuserdata(L, f);
    lua_setfield(L, LUA_REGISTRYINDEX, "mmc.front");
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "mmc.defaults");
    open_env(L);
    if (opt->policy_path) load_policy(L, opt->policy_path, NULL);
    size_t len;
    char *text = try_read_file(opt->graph_path, &len);
    if (!text) return luaL_error(L, "%s: cannot open graph file", opt->graph_path);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    run_chunk(L, text, len, opt->graph_path);
    if (!f->policy_set) load_policy(L, "amp_fp16", NULL);
    int lines = 1;
    for (size_t i = 0; i + 1 < len; i++) lines += text[i] == '\n';
    free(text);
    if (!f->g->loss)
        return luaL_error(L, "%s:%d: no loss: the graph file must call loss(x) on a scalar", opt->graph_path, lines);
    return 0;
}

Graph *frontend_load(const FrontendOptions *opt) {
    const char *base = strrchr(opt->graph_path, '/');
    base = base ? base + 1 : opt->graph_path;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
    char *name = xstrndup(base, n);
    Front f = {0};
    f.g = ir_graph_new(name, opt->graph_path);
    free(name);
    f.opt = opt;
    f.define_used = xcalloc((size_t)opt->n_defines + 1, sizeof(int));
    train_defaults(&f.g->train);
    sha256_init(&f.hash);
    lua_State *L = luaL_newstate();
    if (!L) die("cannot create a Lua state");
    lua_pushcfunction(L, protected_load);
    lua_pushlightuserdata(L, &f);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        die("%s", msg ? msg : "error in graph file");
    }
    lua_close(L);
    for (int i = 0; i < opt->n_defines; i++) {
        if (f.define_used[i]) continue;
        StrBuf b = {0};
        for (int k = 0; k < f.g->n_config; k++) sb_printf(&b, "%s%s", k ? ", " : "", f.g->config[k].key);
        die("-D %s: %s has no config key '%s' (keys: %s)", opt->defines[i].key, opt->graph_path,
            opt->defines[i].key, b.s ? b.s : "none");
    }
    for (int i = 0; i < opt->n_defines; i++) {
        sha256_update(&f.hash, opt->defines[i].key, strlen(opt->defines[i].key) + 1);
        sha256_update(&f.hash, opt->defines[i].value, strlen(opt->defines[i].value) + 1);
    }
    for (int i = 0; i < f.g->n_params; i++) f.g->params[i].node->dtype = f.g->params[i].node->compute = f.g->policy.master;
    free(f.define_used);
    char hex[65];
    sha256_hex(&f.hash, hex);
    f.g->hash = xstrdup(hex);
    return f.g;
}

const char *builtin_policy(const char *name) {
    for (int i = 0; embedded_files[i].path; i++) {
        const char *p = embedded_files[i].path;
        if (strncmp(p, "graphs/policies/", 16) != 0) continue;
        size_t n = strlen(name);
        if (strncmp(p + 16, name, n) == 0 && strcmp(p + 16 + n, ".lua") == 0) return embedded_files[i].text;
    }
    return NULL;
}

const char *builtin_policy_names(void) {
    static StrBuf b;
    if (b.s) return b.s;
    for (int i = 0; embedded_files[i].path; i++) {
        const char *p = embedded_files[i].path;
        if (strncmp(p, "graphs/policies/", 16) != 0) continue;
        const char *end = strstr(p, ".lua");
        sb_printf(&b, "%s%.*s", b.len ? ", " : "", (int)(end - p - 16), p + 16);
    }
    return b.s ? b.s : "";
}
