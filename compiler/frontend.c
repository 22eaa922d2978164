/* frontend: the Lua state and its sandbox, the node values, file inclusion, and the
 * loading of a graph file (see frontend.h and README "The graph file"). The DSL
 * functions live in frontend_ops.c, frontend_policy.c, frontend_train.c and
 * frontend_model.c. */
#include "frontend_internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "util.h"

Front *front_of(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, "mmc.front");
    Front *f = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return f;
}

/* The Lua line that called the DSL function: "graphs/minimind.lua:42" from a file's own code,
 * and from inside a helper function the line of the file that called the helper, with the
 * helper and the line in it: "graphs/minimind.lua:44 (in proj, :29)" (the file is named
 * there too when the helper lives in another one). */
char *where_of(lua_State *L) {
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

void push_node(lua_State *L, Node *n) {
    Node **u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = n;
    luaL_setmetatable(L, "mmc.node");
}

Node *check_node(lua_State *L, int idx, const char *fn, const char *what) {
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
Node *finish(lua_State *L, Node *n) {
    char *err = ir_infer_shape(n);
    if (err) {
        lua_pushfstring(L, "%s: %s", n->where, err);
        free(err);
        lua_error(L);
    }
    push_node(L, n);
    return n;
}

Shape check_shape(lua_State *L, int idx, const char *fn) {
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
void check_options(lua_State *L, int idx, const char *fn, const char *const *known) {
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

void opt_name(lua_State *L, int idx, Node *n) {
    if (lua_isnoneornil(L, idx)) return;
    lua_getfield(L, idx, "name");
    if (!lua_isnil(L, -1)) n->name = xstrdup(luaL_checkstring(L, -1));
    lua_pop(L, 1);
}

Node *make(lua_State *L, Op op, int n_in, Node **in) {
    Front *f = front_of(L);
    char *w = where_of(L);
    Node *n = ir_node(f->g, op, n_in, in, w);
    free(w);
    return n;
}

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

/* ---- the environment */

static const luaL_Reg frontend_env_functions[] = {
    {"include", l_include},
    {NULL, NULL},
};

static int l_unknown_global(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "unknown op or DSL function '%s' (see README, \"The graph file\")", k ? k : "?");
}

void run_chunk(lua_State *L, const char *text, size_t len, const char *chunkname) {
    char *name = xasprintf("@%s", chunkname);
    if (luaL_loadbufferx(L, text, len, name, "t") != LUA_OK) lua_error(L);
    free(name);
    lua_call(L, 0, 0);
}

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
    luaL_setfuncs(L, frontend_graph_functions, 0);
    luaL_setfuncs(L, frontend_policy_functions, 0);
    luaL_setfuncs(L, frontend_train_functions, 0);
    luaL_setfuncs(L, frontend_model_functions, 0);
    luaL_setfuncs(L, frontend_env_functions, 0);
    frontend_open_init(L);
    frontend_open_model(L);
    lua_newtable(L); /* metatable of _G: reading an unknown global is an error */
    lua_pushcfunction(L, l_unknown_global);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
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
    frontend_model_check(L);
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
