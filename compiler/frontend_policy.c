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

/* The fields are checked while they are Lua strings and copied once all are good, so that
 * an error leaves nothing behind. */
static int l_rule(lua_State *L) {
    static const char *const known[] = {"op", "class", "name", "compute", "priority", NULL};
    Front *f = front_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    check_options(L, 1, "rule", known);
    Policy *p = &f->g->policy;
    if (p->n_rules >= FRONTEND_MAX_RULES)
        return luaL_error(L, "rule: the graph has %d precision rules, the most a graph file may make", FRONTEND_MAX_RULES);
    lua_getfield(L, 1, "op");
    const char *op = luaL_optstring(L, -1, NULL);
    if (op && op_parse(op) == OP_COUNT) return luaL_error(L, "rule: unknown op '%s'", op);
    lua_getfield(L, 1, "class");
    const char *cls = luaL_optstring(L, -1, NULL);
    PrecClass c = cls ? prec_class_parse(cls) : PC_NONE;
    if (cls && (c == PC_COUNT || c == PC_NONE))
        return luaL_error(L, "rule: unknown class '%s' (lower_precision, fp32, follow)", cls);
    lua_getfield(L, 1, "name");
    size_t len = 0;
    const char *glob = luaL_optlstring(L, -1, NULL, &len);
    if (len > FRONTEND_MAX_NAME) return luaL_error(L, "rule: the name glob is longer than %d bytes", FRONTEND_MAX_NAME);
    lua_getfield(L, 1, "compute");
    if (lua_isnil(L, -1)) return luaL_error(L, "rule: needs compute = f16|bf16|f32|f64|follow|promote");
    const char *compute = luaL_checkstring(L, -1);
    int ok = 0;
    for (int i = 0; compute_words[i]; i++) ok |= strcmp(compute_words[i], compute) == 0;
    if (!ok) return luaL_error(L, "rule: unknown compute '%s' (f16, bf16, f32, f64, follow, promote)", compute);
    if (!op && !cls && !glob) return luaL_error(L, "rule: needs op, class or name to match");
    lua_getfield(L, 1, "priority");
    int priority = lua_isnil(L, -1) ? 0 : (int)luaL_checkinteger(L, -1);
    char *where = where_of(L);
    Rule r = {op ? xstrdup(op) : NULL, cls ? xstrdup(cls) : NULL, glob ? xstrdup(glob) : NULL, xstrdup(compute),
              priority, 0, where};
    r.order = f->in_policy_file ? f->n_policy_rules++ : 100000 + f->n_graph_rules++;
    vec_push(p->rules, p->n_rules, p->cap_rules, r);
    lua_pop(L, 5);
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
        front_charge(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -1);
            int ok = 0;
            for (int i = 0; known[i]; i++) ok |= strcmp(k, known[i]) == 0;
            if (!ok) return luaL_error(L, "policy: unknown field '%s' (name, rounding, master, loss_scaling, at_least)", k);
        }
    }
    Policy *p = &f->g->policy;
    lua_getfield(L, 1, "name");
    size_t name_len;
    const char *name = luaL_optlstring(L, -1, "custom", &name_len);
    check_name(L, "policy", name, name_len);
    free(p->name);
    p->name = xstrdup(name);
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
    /* the path and the text: a built-in one, a file the graph names (read as include reads),
     * or the file --policy names */
    const char *builtin = builtin_policy(spec);
    if (builtin) {
        lua_pushfstring(L, "policies/%s.lua", spec);
        lua_pushstring(L, builtin);
    } else if (!relative_to) {
        lua_pushstring(L, spec);
        push_named_file(L, spec, "policy file");
    } else if (!read_graph_source(L, "precision", relative_to, spec)) {
        luaL_error(L, "precision: no built-in policy '%s' (%s) and no file %s below %s%s", spec, builtin_policy_names(),
                   spec, relative_to, f->opt->n_include_dirs && spec[0] != '/' ? " or an -I folder" : "");
    }
    size_t len, path_len;
    const char *path = lua_tolstring(L, -2, &path_len), *text = lua_tolstring(L, -1, &len);
    check_word(L, "precision", "the policy's path", path, path_len); /* the plan's policy line holds it */
    free(p->source);
    p->source = xstrdup(path);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    f->in_policy_file = 1;
    run_chunk(L, text, len, path);
    f->in_policy_file = 0;
    if (!p->name) luaL_error(L, "%s: a policy file must call policy { name = ... }", path);
    f->policy_set = 1;
    lua_pop(L, 2);
}

static int l_precision(lua_State *L) {
    Front *f = front_of(L);
    const char *spec = luaL_checkstring(L, 1);
    if (f->opt->policy_path) return 0; /* --policy overrides the graph's choice */
    load_policy(L, spec, front_keep(L, path_dirname(f->opt->graph_path)));
    return 0;
}

const luaL_Reg frontend_policy_functions[] = {
    {"rule", l_rule},
    {"policy", l_policy},
    {"precision", l_precision},
    {NULL, NULL},
};
