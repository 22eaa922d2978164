/* frontend_model: what a graph file declares for the runtime beside the graph (model.h):
 * model{} (the vocabulary and the special ids), the role an input() takes, the fields of
 * the config.json files of a run folder and of an export (checkpoint_config{}, export_hf{},
 * with `null` for JSON's null), and the check, once the file ran, that model{}'s vocabulary
 * is the one the graph's shapes have. */
#include "frontend_internal.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char null_value = 0; /* its address is the light userdata `null` */

static int fail_at(lua_State *L, const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushfstring(L, "%s: ", where);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

/* input(..., { role = "tokens" }): what the runtime writes into the input. A role is taken
 * once, by an input of the role's dtype; the inputs with roles share one [batch, seq] shape,
 * since they hold the same rows. */
void frontend_set_role(lua_State *L, Node *n, const char *name) {
    Graph *g = front_of(L)->g;
    int r = role_parse(name);
    if (r < 0) fail_at(L, n->where, "input %s: unknown role '%s' (%s)", n->name, name, front_keep(L, word_list(role_names)));
    if (g->role[r])
        fail_at(L, n->where, "input %s: the role %s is taken by input %s (at %s)", n->name, name, g->role[r]->name,
                g->role[r]->where);
    if (n->dtype != role_dtypes[r])
        fail_at(L, n->where, "input %s: the role %s needs dtype %s, not %s", n->name, name, dtype_name(role_dtypes[r]),
                dtype_name(n->dtype));
    if (n->shape.rank != 2)
        fail_at(L, n->where, "input %s: the role %s needs a [batch, seq] shape, not %s", n->name, name,
                front_keep(L, shape_str(&n->shape)));
    for (int k = 0; k < ROLE_COUNT; k++)
        if (g->role[k] && !shape_eq(&g->role[k]->shape, &n->shape))
            fail_at(L, n->where, "input %s: the role %s needs the shape of input %s (role %s, %s), not %s", n->name, name,
                    g->role[k]->name, role_names[k], front_keep(L, shape_str(&g->role[k]->shape)),
                    front_keep(L, shape_str(&n->shape)));
    g->role[r] = n;
}

/* model { vocab = V, pad_id = 0, bos_id = 1, eos_id = 2, max_positions = N }: vocab is
 * needed, the rest where the model has them; returns the table */
static int l_model(lua_State *L) {
    ModelInfo *m = &front_of(L)->g->model;
    luaL_checktype(L, 1, LUA_TTABLE);
    if (m->where) return luaL_error(L, "model: called twice (first at %s)", m->where);
    check_options(L, 1, "model", model_field_names);
    for (int k = 0; k < MF_COUNT; k++) {
        lua_getfield(L, 1, model_field_names[k]);
        if (!lua_isnil(L, -1)) {
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < !model_field_is_id[k])
                return luaL_error(L, "model: %s must be a whole number >= %d", model_field_names[k], !model_field_is_id[k]);
            m->value[k] = v;
            m->given |= 1u << k;
        }
        lua_pop(L, 1);
    }
    if (!model_has(m, MF_VOCAB)) return luaL_error(L, "model: vocab is needed (the number of token ids)");
    for (int k = 0; k < MF_COUNT; k++)
        if (model_field_is_id[k] && model_has(m, (ModelField)k) && m->value[k] >= m->value[MF_VOCAB])
            return luaL_error(L, "model: %s %I is not below vocab %I", model_field_names[k], (lua_Integer)m->value[k],
                              (lua_Integer)m->value[MF_VOCAB]);
    m->where = where_of(L);
    lua_settop(L, 1);
    return 1;
}

/* appends to o, or, for the pass that only checks, nothing (o NULL) */
static void put(StrBuf *o, const char *fmt, ...) MMC_PRINTF(2, 3);
static void put(StrBuf *o, const char *fmt, ...) {
    if (!o) return;
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(o, fmt, ap);
    va_end(ap);
}

/* A field's value as JSON text without spaces, so that a plan line holds it: an integer stays
 * one (512), a float keeps a point or an exponent (0.0, 1e-05), a string is quoted and may not
 * hold what would need escaping, and a Lua list of those is an array. */
static void json_text(lua_State *L, int idx, StrBuf *o, const char *fn, const char *key, int in_list) {
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: put(o, "%s", lua_toboolean(L, idx) ? "true" : "false"); return;
    case LUA_TNUMBER: {
        if (lua_isinteger(L, idx)) {
            put(o, "%lld", (long long)lua_tointeger(L, idx));
            return;
        }
        double v = lua_tonumber(L, idx);
        if (!isfinite(v)) luaL_error(L, "%s: %s is not finite (JSON has no inf or nan)", fn, key);
        char d[32];
        fmt_double(d, v);
        put(o, "%s%s", d, strpbrk(d, ".e") ? "" : ".0");
        return;
    }
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        for (const unsigned char *c = (const unsigned char *)s; c < (const unsigned char *)s + len; c++)
            if (*c <= ' ' || *c == '"' || *c == '\\' || *c == 127)
                luaL_error(L, "%s: %s = \"%s\": a string here may hold no spaces, quotes, backslashes or control "
                              "characters (a plan line keeps it between spaces)", fn, key, s);
        put(o, "\"%s\"", s);
        return;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == &null_value) {
            put(o, "null");
            return;
        }
        break;
    case LUA_TTABLE: {
        if (in_list) break;
        lua_Integer n = luaL_len(L, idx), keys = 0;
        for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) keys++;
        if (keys != n) luaL_error(L, "%s: %s: a table here must be a list { a, b, ... }", fn, key);
        front_charge(L, n);
        put(o, "[");
        for (lua_Integer i = 1; i <= n; i++) {
            lua_geti(L, idx, i);
            if (i > 1) put(o, ",");
            json_text(L, lua_gettop(L), o, fn, key, 1);
            lua_pop(L, 1);
        }
        put(o, "]");
        return;
    }
    }
    luaL_error(L, "%s: %s must be a number, string, boolean, null or a list of those, not %s%s", fn, key,
               luaL_typename(L, idx), in_list ? " (in the list)" : "");
}

static int field_order(const void *a, const void *b) {
    return strcmp(((const JsonField *)a)->key, ((const JsonField *)b)->key);
}

/* checkpoint_config { ... }, export_hf { ... }: the fields of that config.json, verbatim;
 * written sorted by key, as transformers writes a config.json; returns the table */
static int json_fields(lua_State *L, JsonFile file) {
    JsonFields *jf = &front_of(L)->g->json[file];
    const char *fn = json_file_names[file];
    luaL_checktype(L, 1, LUA_TTABLE);
    if (jf->where) return luaL_error(L, "%s: called twice (first at %s)", fn, jf->where);
    for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING) return luaL_error(L, "%s: every field needs a name (key = value)", fn);
        const char *key = lua_tostring(L, -2);
        for (const char *c = key; *c; c++)
            if (!(isalnum((unsigned char)*c) || strchr("_.-", *c)))
                return luaL_error(L, "%s: '%s' is no field name (letters, digits, _ . -)", fn, key);
        if (!strcmp(key, json_file_added_key[file]))
            return luaL_error(L, "%s: %s is the field mmc writes itself", fn, key);
        json_text(L, lua_gettop(L), NULL, fn, key, 0); /* the errors first, with nothing held */
        StrBuf v = {0};
        json_text(L, lua_gettop(L), &v, fn, key, 0);
        JsonField e = {xstrdup(key), v.s};
        vec_push(jf->f, jf->n, jf->cap, e);
    }
    qsort(jf->f, (size_t)jf->n, sizeof *jf->f, field_order);
    jf->where = where_of(L);
    lua_settop(L, 1);
    return 1;
}

static int l_checkpoint_config(lua_State *L) { return json_fields(L, JF_CHECKPOINT); }
static int l_export_hf(lua_State *L) { return json_fields(L, JF_EXPORT_HF); }

/* Once the file ran: model{}'s vocabulary is the one the graph's shapes show, wherever they
 * show it: an embedding that looks up the tokens has vocab rows, a cross-entropy against the
 * targets vocab classes. */
void frontend_model_check(lua_State *L) {
    const Graph *g = front_of(L)->g;
    if (!g->model.where) return;
    lua_Integer vocab = (lua_Integer)g->model.value[MF_VOCAB];
    const Node *tokens = g->role[ROLE_TOKENS], *targets = g->role[ROLE_TARGETS];
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i], *t = n->in[0];
        if (n->op == OP_EMBEDDING && tokens && n->in[1] == tokens && t->shape.dim[0] != vocab)
            fail_at(L, g->model.where, "model: vocab %I, but the embedding %s (%s) of the tokens input %s has %I rows %s",
                    vocab, node_label(n), n->where, tokens->name, (lua_Integer)t->shape.dim[0],
                    front_keep(L, shape_str(&t->shape)));
        int64_t classes = n->op == OP_CROSS_ENTROPY ? t->shape.dim[t->shape.rank - 1] : vocab;
        if (n->op == OP_CROSS_ENTROPY && targets && n->in[1] == targets && classes != vocab)
            fail_at(L, g->model.where,
                    "model: vocab %I, but the cross_entropy %s (%s) against the targets input %s has %I classes %s", vocab,
                    node_label(n), n->where, targets->name, (lua_Integer)classes, front_keep(L, shape_str(&t->shape)));
    }
}

void frontend_open_model(lua_State *L) {
    lua_pushlightuserdata(L, (void *)&null_value);
    lua_setglobal(L, "null");
}

const luaL_Reg frontend_model_functions[] = {
    {"model", l_model},
    {"checkpoint_config", l_checkpoint_config},
    {"export_hf", l_export_hf},
    {NULL, NULL},
};
