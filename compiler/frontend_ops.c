/* frontend_ops: the DSL functions that build the graph: config, inputs, parameters,
 * constants, the op wrappers, names and the loss. */
#include "frontend_internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_rules.h"
#include "util.h"

/* defaults { key = value }: values that an including file gives the config{} of the file it
 * includes (tiny.lua sets small sizes for minimind.lua's architecture). -D still wins. */
static int l_defaults(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, LUA_REGISTRYINDEX, "mmc.defaults");
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        front_charge(L, 1);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, 2);
    }
    return 0;
}

static int config_order(const void *a, const void *b) {
    return strcmp(((const ConfigEntry *)a)->key, ((const ConfigEntry *)b)->key);
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
    /* record the final values, sorted by key so the plan does not depend on table order; the
     * plan's config line holds each as key=value between spaces */
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "config: keys must be names");
        size_t len;
        const char *key = lua_tolstring(L, -2, &len);
        check_name(L, "config", key, len);
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *text = lua_tolstring(L, -1, &len);
            check_word(L, "config", key, text, len);
        } else if (lua_type(L, -1) != LUA_TNUMBER && lua_type(L, -1) != LUA_TBOOLEAN) {
            luaL_error(L, "config: '%s' must be a number, string or boolean", key);
        }
        ConfigEntry e = {xstrdup(key), 0, NULL};
        if (lua_type(L, -1) == LUA_TNUMBER) e.value = lua_tonumber(L, -1);
        else if (lua_type(L, -1) == LUA_TSTRING) e.text = xstrdup(lua_tostring(L, -1));
        else e.value = lua_toboolean(L, -1);
        vec_push(f->g->config, f->g->n_config, f->g->cap_config, e);
        lua_pop(L, 1);
    }
    qsort(f->g->config, (size_t)f->g->n_config, sizeof *f->g->config, config_order);
    lua_pushvalue(L, 1);
    return 1;
}

/* input(name, shape, dtype, { role = "tokens" }): the role says what the runtime writes there
 * (model.h), so that it needs no input's name */
static int l_input(lua_State *L) {
    static const char *const known[] = {"role", NULL};
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    check_name(L, "input", name, len);
    Shape s = check_shape(L, 2, "input");
    DType t = dtype_parse(luaL_optstring(L, 3, "f32"));
    if (t == DT_NONE) return luaL_error(L, "input: unknown dtype '%s'", lua_tostring(L, 3));
    check_options(L, 4, "input", known);
    Node *n = make(L, OP_INPUT, 0, NULL);
    n->name = xstrdup(name);
    n->shape = s;
    n->dtype = n->compute = t;
    check_numel(L, n);
    if (!lua_isnoneornil(L, 4)) {
        lua_getfield(L, 4, "role");
        if (!lua_isnil(L, -1)) frontend_set_role(L, n, luaL_checkstring(L, -1));
        lua_pop(L, 1);
    }
    push_node(L, n);
    return 1;
}

/* Initialisers are strings the runtime interprets: "normal(mean,std)", "uniform(lo,hi)",
 * "fan_in" (torch.nn.Linear's default: uniform(+-1/sqrt(in_features))), "ones", "zeros". */
static int check_init(const char *s) {
    double a, b;
    char tail;
    /* the plan holds it as one word, and sscanf would pass spaces before a number */
    if (strlen(s) > 64 || strspn(s, "abcdefghijklmnopqrstuvwxyz_0123456789.,()+-eE") != strlen(s)) return 0;
    if (!strcmp(s, "ones") || !strcmp(s, "zeros") || !strcmp(s, "fan_in")) return 1;
    if (sscanf(s, "normal(%lf,%lf)%c", &a, &b, &tail) == 2 && isfinite(a) && isfinite(b) && b >= 0) return 1;
    if (sscanf(s, "uniform(%lf,%lf)%c", &a, &b, &tail) == 2 && isfinite(a) && isfinite(b) && a <= b) return 1;
    return 0;
}

/* ---- the parameters' names (NameSet, frontend_internal.h): open addressing, FNV-1a */

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* the parameter that has the name, or -1 */
static int names_find(const NameSet *s, const char *name) {
    if (!s->cap) return -1;
    for (size_t i = name_hash(name) & (size_t)(s->cap - 1);; i = (i + 1) & (size_t)(s->cap - 1)) {
        if (!s->key[i]) return -1;
        if (!strcmp(s->key[i], name)) return s->param[i];
    }
}

static void names_add(NameSet *s, const char *name, int param) {
    if (2 * (s->n + 1) > s->cap) { /* at most half full, so a probe ends soon */
        NameSet t = {xcalloc((size_t)(s->cap ? 2 * s->cap : 64), sizeof *t.key), NULL, 0, s->cap ? 2 * s->cap : 64};
        t.param = xcalloc((size_t)t.cap, sizeof *t.param);
        for (int i = 0; i < s->cap; i++)
            if (s->key[i]) names_add(&t, s->key[i], s->param[i]);
        names_free(s);
        *s = t;
    }
    size_t i = name_hash(name) & (size_t)(s->cap - 1);
    while (s->key[i]) i = (i + 1) & (size_t)(s->cap - 1);
    s->key[i] = name;
    s->param[i] = param;
    s->n++;
}

void names_free(NameSet *s) {
    free(s->key);
    free(s->param);
    *s = (NameSet){0};
}

static int l_param(lua_State *L) {
    Front *f = front_of(L);
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    check_name(L, "param", name, len);
    Shape s = check_shape(L, 2, "param");
    const char *init = luaL_optstring(L, 3, "fan_in");
    if (!check_init(init))
        return luaL_error(L, "param %s: bad init '%s' (ones, zeros, fan_in, normal(m,s), uniform(a,b))", name, init);
    int first = names_find(&f->param_names, name);
    if (first >= 0) return luaL_error(L, "param %s: declared twice (first at %s)", name, f->g->params[first].node->where);
    Node *n = make(L, OP_PARAM, 0, NULL);
    n->name = xstrdup(name);
    n->shape = s;
    n->dtype = n->compute = DT_F32; /* set to the policy's master dtype once it is known */
    n->a.init = xstrdup(init);
    n->param_index = f->g->n_params;
    check_numel(L, n);
    Param p = {n, 0, NULL};
    vec_push(f->g->params, f->g->n_params, f->g->cap_params, p);
    names_add(&f->param_names, n->name, n->param_index);
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
        check_numel(L, n);
        push_node(L, n);
    }
    return 2;
}

/* ---- ops */

/* The option table of an op's DSL call, from the attribute table (attrs.h): `name` and the
 * op's AS_OPTION attributes, each of its kind; a key outside them is an error. Returns the
 * mask of the attributes the table gave (the others keep the values the caller set). */
static unsigned op_options(lua_State *L, int idx, Node *n) {
    const char *fn = op_info[n->op].name;
    unsigned mask = op_info[n->op].attrs, given = 0;
    const char *known[ATTR_COUNT + 2];
    int k = 0;
    known[k++] = "name";
    for (int id = 0; id < ATTR_COUNT; id++)
        if ((mask & (1u << id)) && attr_info[id].source == AS_OPTION) known[k++] = attr_info[id].key;
    known[k] = NULL;
    check_options(L, idx, fn, known);
    if (lua_isnoneornil(L, idx)) return 0;
    for (int i = 1; i < k; i++) {
        AttrId id = attr_by_key(known[i]);
        lua_getfield(L, idx, known[i]);
        if (!lua_isnil(L, -1)) {
            char text[40];
            int ok = 1;
            switch (attr_info[id].kind) {
            case AK_BOOL:
                ok = lua_isboolean(L, -1);
                snprintf(text, sizeof text, "%d", lua_toboolean(L, -1));
                break;
            case AK_INT:
            case AK_I64: {
                lua_Integer v = lua_tointegerx(L, -1, &ok);
                snprintf(text, sizeof text, "%lld", (long long)v);
                break;
            }
            case AK_REAL:
                ok = lua_type(L, -1) == LUA_TNUMBER;
                fmt_double(text, lua_tonumber(L, -1));
                break;
            case AK_DTYPE:
            case AK_TEXT:
                ok = lua_type(L, -1) == LUA_TSTRING;
                snprintf(text, sizeof text, "%s", ok ? lua_tostring(L, -1) : "");
                break;
            }
            static const char *const wanted[] = {[AK_DTYPE] = "a dtype name", [AK_INT] = "an integer", [AK_I64] = "an integer",
                                                 [AK_BOOL] = "true or false", [AK_REAL] = "a number", [AK_TEXT] = "a string"};
            if (!ok) luaL_error(L, "%s: option '%s' must be %s", fn, known[i], wanted[attr_info[id].kind]);
            char *err = attr_parse(&n->a, id, text);
            if (err) luaL_error(L, "%s: %s", fn, front_keep(L, err));
            given |= 1u << id;
        }
        lua_pop(L, 1);
    }
    opt_name(L, idx, n);
    return given;
}

/* op(in..., { options }) for ops whose inputs are all tensors */
static int l_op(lua_State *L, Op op) {
    static const char *const what[] = {"first input", "second input", "third input"};
    int n_in = op_info[op].n_in;
    Node *in[3];
    for (int i = 0; i < n_in; i++) in[i] = check_node(L, i + 1, op_info[op].name, n_in == 1 ? "x" : what[i]);
    Node *n = make(L, op, n_in, in);
    op_options(L, n_in + 1, n);
    finish(L, n);
    return 1;
}

static int l_add(lua_State *L) { return l_op(L, OP_ADD); }
static int l_add_(lua_State *L) { return l_op(L, OP_ADD_); }
static int l_mul(lua_State *L) { return l_op(L, OP_MUL); }
static int l_type_as(lua_State *L) { return l_op(L, OP_TYPE_AS); }
static int l_silu(lua_State *L) { return l_op(L, OP_SILU); }
static int l_sum_all(lua_State *L) { return l_op(L, OP_SUM_ALL); }
static int l_embedding(lua_State *L) { return l_op(L, OP_EMBEDDING); }

static int l_cast(lua_State *L) {
    Node *x = check_node(L, 1, "cast", "x");
    const char *to = luaL_checkstring(L, 2);
    DType t = dtype_parse(to);
    if (!dtype_is_float(t)) return luaL_error(L, "cast: unknown float dtype '%s' (f16, bf16, f32, f64)", to);
    Node *n = make(L, OP_CAST, 1, &x);
    n->a.to = t;
    n->explicit_cast = 1;
    op_options(L, 3, n);
    finish(L, n);
    return 1;
}

/* op(x, number, { options }): the number is the op's one AS_ARGUMENT attribute */
static int l_unary_number(lua_State *L, Op op) {
    Node *x = check_node(L, 1, op_info[op].name, "x");
    luaL_checknumber(L, 2);
    char text[32];
    fmt_double(text, lua_tonumber(L, 2));
    Node *n = make(L, op, 1, &x);
    for (int id = 0; id < ATTR_COUNT; id++)
        if ((op_info[op].attrs & (1u << id)) && attr_info[id].source == AS_ARGUMENT) free(attr_parse(&n->a, (AttrId)id, text));
    op_options(L, 3, n);
    finish(L, n);
    return 1;
}

static int l_scale(lua_State *L) { return l_unary_number(L, OP_SCALE); }
static int l_rms_normalize(lua_State *L) { return l_unary_number(L, OP_RMS_NORMALIZE); }

static int l_linear(lua_State *L) {
    Node *in[2] = {check_node(L, 1, "linear", "x"), check_node(L, 2, "linear", "weight")};
    Node *n = make(L, OP_LINEAR, 2, in);
    /* named after its weight unless told otherwise: model.layers.0.self_attn.q_proj */
    const char *wn = in[1]->name;
    size_t len = wn ? strlen(wn) : 0;
    if (wn && len > 7 && strcmp(wn + len - 7, ".weight") == 0) n->name = xstrndup(wn, len - 7);
    op_options(L, 3, n);
    finish(L, n);
    return 1;
}

static int l_rope(lua_State *L) {
    Node *in[3] = {check_node(L, 1, "rope", "x"), check_node(L, 2, "rope", "cos"), check_node(L, 3, "rope", "sin")};
    Node *n = make(L, OP_ROPE, 3, in);
    op_options(L, 4, n);
    finish(L, n);
    return 1;
}

static int l_attention(lua_State *L) {
    Node *in[3] = {check_node(L, 1, "attention", "q"), check_node(L, 2, "attention", "k"),
                   check_node(L, 3, "attention", "v")};
    Node *n = make(L, OP_ATTENTION, 3, in);
    n->a.causal = 1;
    if (!(op_options(L, 4, n) & ATTR_BIT(KV_HEADS))) n->a.kv_heads = n->a.heads; /* plain multi-head attention */
    finish(L, n);
    return 1;
}

static int l_cross_entropy(lua_State *L) {
    Node *in[2] = {check_node(L, 1, "cross_entropy", "logits"), check_node(L, 2, "cross_entropy", "labels")};
    Node *n = make(L, OP_CROSS_ENTROPY, 2, in);
    n->a.ignore_index = -100; /* torch's default */
    op_options(L, 3, n);
    finish(L, n);
    return 1;
}

/* tie("lm_head.weight", embed): the parameter also goes by this state-dict name, so
 * checkpoints carry both keys, as MiniMind's tied state dict does. */
static int l_tie(lua_State *L) {
    Front *f = front_of(L);
    size_t len;
    const char *alias = luaL_checklstring(L, 1, &len);
    Node *n = check_node(L, 2, "tie", "parameter");
    if (n->op != OP_PARAM) return luaL_error(L, "tie: %s is not a parameter", node_label(n));
    check_name(L, "tie", alias, len);
    int taken = names_find(&f->param_names, alias);
    if (taken >= 0)
        return luaL_error(L, "tie: the name %s is taken (by param %s, at %s)", alias, f->g->params[taken].node->name,
                          f->g->params[taken].node->where);
    Param *p = &f->g->params[n->param_index];
    if (p->alias) return luaL_error(L, "tie: %s already has the second name %s", n->name, p->alias);
    p->alias = xstrdup(alias);
    names_add(&f->param_names, p->alias, n->param_index);
    lua_settop(L, 2);
    return 1;
}

static int l_named(lua_State *L) {
    Node *n = check_node(L, 1, "named", "x");
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    check_name(L, "named", name, len);
    /* a parameter's name is its state-dict key, which param() checked is not taken */
    if (n->op == OP_PARAM) return luaL_error(L, "named: %s is a parameter; its name is the one param() gave", n->name);
    free(n->name);
    n->name = xstrdup(name);
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
    if (n->shape.rank != 0)
        return luaL_error(L, "loss: must be a scalar, got %s %s", node_label(n), front_keep(L, shape_str(&n->shape)));
    if (f->g->loss) return luaL_error(L, "loss: set twice (first at %s)", f->g->loss->where);
    f->g->loss = n;
    lua_settop(L, 1);
    return 1;
}

const luaL_Reg frontend_graph_functions[] = {
    {"config", l_config},       {"defaults", l_defaults},
    {"input", l_input},         {"param", l_param},
    {"rope_tables", l_rope_tables}, {"tie", l_tie},
    {"embedding", l_embedding}, {"linear", l_linear},
    {"rms_normalize", l_rms_normalize},
    {"cast", l_cast},           {"type_as", l_type_as},
    {"add", l_add},             {"add_", l_add_},
    {"mul", l_mul},             {"scale", l_scale},
    {"silu", l_silu},           {"rope", l_rope},
    {"attention", l_attention}, {"cross_entropy", l_cross_entropy},
    {"sum_all", l_sum_all},     {"named", l_named},
    {"shape", l_shape},         {"loss", l_loss},
    {NULL, NULL},
};

/* init.normal(m, s), init.uniform(a, b), init.ones, init.zeros, init.fan_in: the strings
 * param() takes */
void frontend_open_init(lua_State *L) {
    lua_newtable(L);
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
    lua_setglobal(L, "init");
}
