/* frontend_policy: precision rules and policies: rule{}, policy{}, precision "name", and
 * the loading of a policy file (built-in or on disk). */
#include "frontend_internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "util.h"

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

void load_policy(lua_State *L, const char *spec, const char *relative_to) {
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

const luaL_Reg frontend_policy_functions[] = {
    {"rule", l_rule},
    {"policy", l_policy},
    {"precision", l_precision},
    {NULL, NULL},
};
