/* frontend: the Lua state and its sandbox, the node values, file inclusion, and the
 * loading of a graph file (see frontend.h and README "The graph file"). The DSL
 * functions live in frontend_ops.c, frontend_policy.c, frontend_train.c and
 * frontend_model.c. */
#include "frontend_internal.h"
#include "precision_schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedded.h"
#include "util.h"

/* kept in the state's extra space, since the step hook asks for it every few thousand steps */
Front *front_of(lua_State *L) { return *(Front **)lua_getextraspace(L); }

/* The Lua line at stack level `level0`: "graphs/minimind.lua:42" in a file's own code, and
 * inside a helper function the line of the file that called the helper, with the helper and
 * the line in it: "graphs/minimind.lua:44 (in proj, :29)" (the file is named there too when
 * the helper lives in another one). The caller is looked for among the WHERE_LEVELS levels
 * above (each lua_getstack walks the stack from the top), so deep recursion names its own
 * line; `charge` counts that walk against the step limit. */
enum { WHERE_LEVELS = 64 };
static char *where_at(lua_State *L, int level0, int charge) {
    lua_Debug at, up;
    /* a C function at that level (a hook's call event) has no line: the Lua code that called it */
    while (lua_getstack(L, level0, &at) && lua_getinfo(L, "Sln", &at) && at.currentline < 0 && level0 < WHERE_LEVELS) level0++;
    if (!lua_getstack(L, level0, &at) || !lua_getinfo(L, "Sln", &at) || at.currentline < 0) return xstrdup("?");
    if (!strcmp(at.what, "main")) return xasprintf("%s:%d", at.short_src, at.currentline);
    for (int level = level0 + 1; level <= level0 + WHERE_LEVELS && lua_getstack(L, level, &up); level++) {
        if (charge) front_charge(L, level);
        if (!lua_getinfo(L, "Sl", &up) || strcmp(up.what, "main") || up.currentline < 0) continue;
        char *fn = at.name ? xasprintf("%.64s", at.name) : xasprintf("the function of line %d", at.linedefined);
        char *s = strcmp(at.short_src, up.short_src)
                      ? xasprintf("%s:%d (in %s, %s:%d)", up.short_src, up.currentline, fn, at.short_src, at.currentline)
                      : xasprintf("%s:%d (in %s, :%d)", up.short_src, up.currentline, fn, at.currentline);
        free(fn);
        return s;
    }
    return xasprintf("%s:%d", at.short_src, at.currentline);
}

/* The line that called the DSL function (see where_at). */
char *where_of(lua_State *L) { return where_at(L, 1, 1); }

/* ---- the limits (frontend.h) */

/* A step is a VM instruction (counted by the hook below, every STEP_HOOK_EVERY), a value
 * passed into or out of a call (one instruction can pass the whole stack, 10^6 values), an
 * element a C function of the DSL or the library loops over (front_charge), or a byte the
 * Lua state allocates: a concatenation or a string.rep is one instruction that copies them
 * all. */
enum { STEP_HOOK_EVERY = 10000, STEP_HOOKS = LUA_MASKCOUNT | LUA_MASKCALL | LUA_MASKRET };

static int steps_over(const Front *f) { return f->steps > f->lua_steps; }

static void step_hook(lua_State *L, lua_Debug *ar);

/* The Lua state's allocator: counts its bytes and refuses what would pass the limit, which
 * Lua raises as a memory error once a full collection did not make room. When its bytes
 * pass the step limit, the hook is made to run at the next instruction. */
static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    Front *f = ud;
    size_t old = ptr ? osize : 0; /* osize is the kind of object when ptr is NULL */
    if (nsize == 0) {
        free(ptr);
        f->lua_bytes -= old;
        return NULL;
    }
    if (nsize > old && nsize - old > f->lua_memory - f->lua_bytes) {
        f->lua_refused = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p) {
        f->lua_bytes = f->lua_bytes - old + nsize;
        if (nsize > old) f->steps += (int64_t)(nsize - old);
        if (f->L && steps_over(f)) lua_sethook(f->L, step_hook, STEP_HOOKS, 1);
    }
    return p;
}

/* The error is raised at the line running, and again at every later check, so nothing the
 * file left to run goes on past it. */
static int steps_exceeded(lua_State *L, int level) {
    Front *f = front_of(L);
    char *w = where_at(L, level, 0);
    lua_pushfstring(L, "%s: the graph file ran past its limit of %I Lua steps (mmc compile --lua-steps N raises it)", w,
                    (lua_Integer)f->lua_steps);
    free(w);
    return lua_error(L);
}

void front_charge(lua_State *L, int64_t steps) {
    Front *f = front_of(L);
    f->steps += steps;
    if (steps_over(f)) steps_exceeded(L, 1);
}

/* the extra arguments of a vararg call, which the call hook's ntransfer leaves out: found
 * by halving, as lua_getlocal(-k) answers whether there are k of them */
static int64_t vararg_count(lua_State *L, lua_Debug *ar) {
    int lo = 0, hi = 1;
    while (hi < (1 << 22) && lua_getlocal(L, ar, -hi)) {
        lua_pop(L, 1);
        lo = hi, hi *= 2;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (lua_getlocal(L, ar, -mid)) {
            lua_pop(L, 1);
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static void step_hook(lua_State *L, lua_Debug *ar) {
    Front *f = front_of(L);
    if (ar->event == LUA_HOOKCOUNT) {
        f->steps += STEP_HOOK_EVERY;
    } else if (lua_getinfo(L, "ru", ar)) {
        f->steps += ar->ntransfer;
        if (ar->event != LUA_HOOKRET && ar->isvararg) f->steps += vararg_count(L, ar);
    }
    if (steps_over(f)) steps_exceeded(L, 0);
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
    check_numel(L, n);
    push_node(L, n);
    return n;
}

void check_numel(lua_State *L, Node *n) {
    Front *f = front_of(L);
    int64_t numel = shape_numel_checked(&n->shape);
    if (numel >= 0 && numel <= IR_MAX_GRAPH_NUMEL - f->numel) {
        f->numel += numel;
        return;
    }
    char *s = shape_str(&n->shape);
    if (numel < 0)
        lua_pushfstring(L, "%s: %s %s: %s has more than 2^40 elements, the most one value may have", n->where,
                        op_info[n->op].name, node_label(n), s);
    else
        lua_pushfstring(L, "%s: %s %s %s: the graph's values hold more than 2^44 elements in all", n->where,
                        op_info[n->op].name, node_label(n), s);
    free(s);
    lua_error(L);
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
            luaL_error(L, "%s: unknown option '%s' (known: %s)", fn, k ? k : "?", b.s ? front_keep(L, b.s) : "none");
        }
        lua_pop(L, 1);
    }
}

/* s for a message: at most 64 bytes, control characters, quotes and backslashes escaped,
 * so that the message stays one line */
static char *quoted(const char *s) {
    StrBuf b = {0};
    sb_append(&b, "\"");
    size_t i = 0;
    for (; s[i] && i < 64; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') sb_append(&b, "\\n");
        else if (c == '"' || c == '\\') sb_printf(&b, "\\%c", c);
        else if (c < ' ' || c == 127) sb_printf(&b, "\\x%02x", c);
        else sb_appendn(&b, (const char *)&c, 1);
    }
    sb_append(&b, s[i] ? "\"..." : "\"");
    return b.s;
}

static const char *char_name(unsigned char c, char buf[16]) {
    if (c == ' ') return "a space";
    if (c == '\n') return "a newline";
    if (c == '\t') return "a tab";
    if (c < ' ' || c >= 127) snprintf(buf, 16, "byte 0x%02x", c);
    else snprintf(buf, 16, "'%c'", c);
    return buf;
}

/* A name is what a state-dict key holds, so that a plan line, which keeps it between
 * spaces, and a checkpoint carry it whole; '%' starts the names mmc makes itself. */
static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("_.-:/", c));
}

void check_name(lua_State *L, const char *fn, const char *name, size_t len) {
    size_t i = 0;
    while (i < len && name_char(name[i])) i++;
    if (i == len && len > 0 && len <= FRONTEND_MAX_NAME) return;
    char *q = quoted(name), buf[16];
    if (len == 0) lua_pushfstring(L, "%s: a name may not be empty", fn);
    else if (i == len)
        lua_pushfstring(L, "%s: the name %s is longer than %d bytes", fn, q, (int)FRONTEND_MAX_NAME);
    else
        lua_pushfstring(L, "%s: the name %s has %s at character %d; a name holds letters, digits and _ . - : / "
                           "(as a state-dict key does)", fn, q, char_name((unsigned char)name[i], buf), (int)i + 1);
    free(q);
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
    lua_error(L);
}

void check_word(lua_State *L, const char *fn, const char *what, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > ' ' && c != 127) continue;
        char *q = quoted(s), buf[16];
        luaL_where(L, 1);
        lua_pushfstring(L, "%s: %s %s has %s at character %d; it may hold no spaces or control characters (a plan "
                           "line keeps it between spaces)", fn, what, q, char_name(c, buf), (int)i + 1);
        free(q);
        lua_concat(L, 2);
        lua_error(L);
    }
}

void opt_name(lua_State *L, int idx, Node *n) {
    if (lua_isnoneornil(L, idx)) return;
    lua_getfield(L, idx, "name");
    if (!lua_isnil(L, -1)) {
        size_t len;
        const char *name = luaL_checklstring(L, -1, &len);
        check_name(L, op_info[n->op].name, name, len);
        free(n->name);
        n->name = xstrdup(name);
    }
    lua_pop(L, 1);
}

Node *make(lua_State *L, Op op, int n_in, Node **in) {
    Front *f = front_of(L);
    if (f->g->n_nodes >= f->max_nodes)
        luaL_error(L, "%s: the graph has %d nodes, the most a graph file may make", op_info[op].name, f->max_nodes);
    char *w = where_of(L);
    Node *n = ir_node(f->g, op, n_in, in, w);
    free(w);
    return n;
}

/* ---- the files a graph file reads */

/* Reads fd to its end: the text, NUL-terminated, or NULL when it holds more than `limit`
 * bytes (errno 0) or a read fails (errno set). */
static char *read_fd(int fd, size_t limit, size_t *len) {
    StrBuf b = {0};
    char chunk[1 << 16];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || (size_t)n > limit - b.len) {
            int e = n < 0 ? errno : 0;
            sb_free(&b);
            errno = e;
            return NULL;
        }
        if (n == 0) break;
        sb_appendn(&b, chunk, (size_t)n);
    }
    if (!b.s) b.s = xstrdup("");
    *len = b.len;
    return b.s;
}

static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

static int is_below(const char *real, const char *root) {
    size_t n = strlen(root);
    return !strncmp(real, root, n) && (real[n] == '/' || real[n] == 0 || !strcmp(root, "/"));
}

/* raises "file:line: message" at the DSL call, once what the caller holds is freed */
static int fail_freeing(lua_State *L, char *a, char *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, 1);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    free(a);
    free(b);
    return lua_error(L);
}

static int push_lstring(lua_State *L) {
    lua_pushlstring(L, lua_touserdata(L, 1), (size_t)lua_tointeger(L, 2));
    return 1;
}

/* Pushes s (len bytes) as a Lua string and frees it, also when the Lua state has no room
 * for it (the push runs protected; its memory error is raised again once s is freed). */
static void push_owned(lua_State *L, char *s, size_t len) {
    lua_pushcfunction(L, push_lstring);
    lua_pushlightuserdata(L, s);
    lua_pushinteger(L, (lua_Integer)len);
    int status = lua_pcall(L, 2, 1, 0);
    free(s);
    if (status != LUA_OK) lua_error(L);
}

const char *front_keep(lua_State *L, char *s) {
    push_owned(L, s, strlen(s));
    return lua_tostring(L, -1);
}

/* A graph file reads what its folders hold and nothing else: not /etc/passwd by a path with
 * enough "..", not a symbolic link out, and no FIFO or device that would block or never end
 * (the file is opened without blocking, and its kind checked on the open descriptor). */
int read_graph_source(lua_State *L, const char *fn, const char *dir, const char *rel) {
    Front *f = front_of(L);
    int n_try = rel[0] == '/' ? 1 : 1 + f->opt->n_include_dirs;
    for (int i = 0; i < n_try; i++) {
        char *path = path_join(i == 0 ? dir : f->opt->include_dirs[i - 1], rel);
        char *real = realpath(path, NULL);
        if (!real) {
            if (errno == ENOENT || errno == ENOTDIR) {
                free(path);
                continue;
            }
            fail_freeing(L, path, NULL, "%s: cannot open %s: %s", fn, path, strerror(errno));
        }
        int inside = 0;
        for (int r = 0; r < f->n_roots; r++) inside |= is_below(real, f->roots[r]);
        if (!inside) {
            StrBuf roots = {0};
            for (int r = 0; r < f->n_roots; r++) sb_printf(&roots, "%s%s", r ? ", " : "", f->roots[r]);
            push_owned(L, roots.s, roots.len);
            fail_freeing(L, path, real, "%s: %s is %s, outside the folders a graph file may read (%s; mmc compile -I DIR "
                                        "adds one)", fn, path, real, lua_tostring(L, -1));
        }
        int fd = open(real, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            int e = errno;
            if (fd >= 0) close(fd);
            fail_freeing(L, path, real, "%s: cannot open %s: %s", fn, path, strerror(e));
        }
        if (!S_ISREG(st.st_mode)) {
            close(fd);
            fail_freeing(L, path, real, "%s: %s is %s, not a file", fn, path, file_kind(st.st_mode));
        }
        size_t len;
        char *text = read_fd(fd, f->lua_memory, &len);
        int e = errno;
        close(fd);
        if (!text && e) fail_freeing(L, path, real, "%s: cannot read %s: %s", fn, path, strerror(e));
        if (!text)
            fail_freeing(L, path, real, "%s: %s is larger than the Lua state may hold (%I MiB; mmc compile --lua-memory "
                                        "MiB raises it)", fn, path, (lua_Integer)(f->lua_memory >> 20));
        free(real);
        push_owned(L, text, len);
        push_owned(L, path, strlen(path));
        lua_insert(L, -2);
        front_charge(L, (int64_t)len); /* reading and hashing it, however often it is read */
        return 1;
    }
    return 0;
}

/* include "file.lua": runs another graph file in this one's environment (path relative to the
 * including file, else to an -I folder), so a variant can reuse an architecture. */
static int l_include(lua_State *L) {
    Front *f = front_of(L);
    const char *rel = luaL_checkstring(L, 1);
    lua_Debug ar;
    char *dir = NULL;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "S", &ar) && ar.source[0] == '@') dir = path_dirname(ar.source + 1);
    if (!dir) dir = xstrdup(".");
    push_owned(L, dir, strlen(dir));
    if (!read_graph_source(L, "include", lua_tostring(L, -1), rel))
        return luaL_error(L, "include: cannot open %s: no such file below %s%s", rel, lua_tostring(L, -1),
                          rel[0] == '/' ? "" : f->opt->n_include_dirs ? " or an -I folder" : " (mmc compile -I DIR adds a folder)");
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    run_chunk(L, text, len, lua_tostring(L, -2));
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
    lua_pushfstring(L, "@%s", chunkname);
    if (luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t") != LUA_OK) lua_error(L);
    lua_remove(L, -2);
    lua_call(L, 0, 0);
}

/* ---- library functions whose C loops no instruction count sees, charged by their size */

static int call_original(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int64_t capped(lua_Integer n) { return n < 0 ? 0 : n > ((int64_t)1 << 50) ? (int64_t)1 << 50 : n; }

/* string.rep of an empty string with an empty separator copies nothing n times */
static int l_string_rep(lua_State *L) {
    size_t l, lsep;
    luaL_checklstring(L, 1, &l);
    luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (l + lsep > 0) return call_original(L);
    lua_pushliteral(L, "");
    return 1;
}

/* table.insert and table.remove move every element after the place, table.move its range,
 * table.sort compares n log n times */
static int l_table_shift(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    front_charge(L, capped(luaL_len(L, 1)));
    return call_original(L);
}

static int l_table_move(lua_State *L) {
    lua_Integer from = luaL_checkinteger(L, 2), to = luaL_checkinteger(L, 3);
    if (to >= from) front_charge(L, capped(to / 2 - from / 2) * 2 + 2);
    return call_original(L);
}

static int l_table_sort(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int64_t n = capped(luaL_len(L, 1)), log = 1;
    while (log < 64 && ((int64_t)1 << log) < n) log++;
    front_charge(L, n * log);
    return call_original(L);
}

/* print writes what it is given in C */
static int l_print(lua_State *L) {
    for (int i = 1; i <= lua_gettop(L); i++) front_charge(L, 1 + (int64_t)(lua_type(L, i) == LUA_TSTRING ? lua_rawlen(L, i) : 0));
    return call_original(L);
}

/* A finalizer runs with hooks off (Lua's GC stops them), so a __gc loop would run for ever;
 * a graph file has nothing to finalize. */
static int l_setmetatable(lua_State *L) {
    if (lua_istable(L, 2)) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL) return luaL_error(L, "setmetatable: a graph file may not set __gc");
        lua_pop(L, 1);
    }
    return call_original(L);
}

static void wrap(lua_State *L, const char *lib, const char *name, lua_CFunction fn) {
    if (lib) lua_getglobal(L, lib);
    else lua_pushglobaltable(L);
    lua_getfield(L, -1, name);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, -2, name);
    lua_pop(L, 1);
}

static void open_env(lua_State *L) {
    /* only the harmless parts of the standard library: a graph file describes, it does not act */
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    lua_pop(L, 4);
    /* pcall and xpcall would let a file catch the limits' errors and go on; Lua's pattern
     * matching backtracks in C for as long as a pattern asks, which no step count sees */
    static const char *const unsafe[] = {"dofile", "loadfile", "load", "require", "collectgarbage", "pcall", "xpcall", NULL};
    for (int i = 0; unsafe[i]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, unsafe[i]);
    }
    static const char *const patterns[] = {"find", "match", "gmatch", "gsub", NULL};
    lua_getglobal(L, LUA_STRLIBNAME);
    for (int i = 0; patterns[i]; i++) {
        lua_pushnil(L);
        lua_setfield(L, -2, patterns[i]);
    }
    lua_pop(L, 1);
    wrap(L, NULL, "setmetatable", l_setmetatable);
    wrap(L, NULL, "print", l_print);
    wrap(L, LUA_STRLIBNAME, "rep", l_string_rep);
    wrap(L, LUA_TABLIBNAME, "insert", l_table_shift);
    wrap(L, LUA_TABLIBNAME, "remove", l_table_shift);
    wrap(L, LUA_TABLIBNAME, "move", l_table_move);
    wrap(L, LUA_TABLIBNAME, "sort", l_table_sort);
    luaL_newmetatable(L, "mmc.node");
    lua_pushcfunction(L, node_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "mmc.node"); /* what getmetatable(node) gives: not the table, which a __gc put in would make
                                       every later node's finalizer */
    lua_setfield(L, -2, "__metatable");
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

/* A file named on the command line (the graph, --policy) is the user's choice: any kind a
 * read reaches the end of (a pipe too), as long as it fits the Lua state. */
void push_named_file(lua_State *L, const char *path, const char *what) {
    Front *f = front_of(L);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) luaL_error(L, "%s: cannot open %s: %s", path, what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        luaL_error(L, "%s: the %s is a folder", path, what);
    }
    size_t len;
    char *text = read_fd(fd, f->lua_memory, &len);
    int e = errno;
    close(fd);
    if (!text && e) luaL_error(L, "%s: cannot read %s: %s", path, what, strerror(e));
    if (!text)
        luaL_error(L, "%s: the %s is larger than the Lua state may hold (%I MiB; mmc compile --lua-memory MiB raises it)",
                   path, what, (lua_Integer)(f->lua_memory >> 20));
    push_owned(L, text, len);
}

static int protected_load(lua_State *L) {
    Front *f = front_of(L);
    const FrontendOptions *opt = f->opt;
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "mmc.defaults");
    open_env(L);
    if (opt->policy_path) load_policy(L, opt->policy_path, NULL);
    push_named_file(L, opt->graph_path, "graph file");
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    sha256_update(&f->hash, text, len);
    sha256_update(&f->hash, "", 1);
    run_chunk(L, text, len, opt->graph_path);
    if (!f->policy_set) load_policy(L, "amp_fp16", NULL);
    int lines = 1;
    for (size_t i = 0; i + 1 < len; i++) lines += text[i] == '\n';
    if (!f->g->loss)
        return luaL_error(L, "%s:%d: no loss: the graph file must call loss(x) on a scalar", opt->graph_path, lines);
    frontend_model_check(L);
    return 0;
}

/* the message starts with a place, "file:line:" or "file.lua:" (a chunk name has no spaces) */
static int names_a_place(const char *msg) {
    const char *colon = strchr(msg, ':');
    if (!colon || colon == msg || memchr(msg, ' ', (size_t)(colon - msg))) return 0;
    return (colon[1] >= '0' && colon[1] <= '9') || (colon - msg >= 4 && !strncmp(colon - 4, ".lua", 4));
}

/* The message handler: an error raised in C without a place (string.rep's "resulting
 * string too large", error(msg, 0)) gets the line of the Lua code that called it. */
static int add_place(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    lua_Debug ar;
    if (!msg || names_a_place(msg)) return 1;
    for (int level = 1; level < WHERE_LEVELS && lua_getstack(L, level, &ar); level++)
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
            return 1;
        }
    return 1;
}

/* The one line die() prints for a failed run: the limit that ended it, or Lua's message with
 * the graph's path in front where it names no place, control characters escaped. */
static void error_line(lua_State *L, const Front *f, int status, char *out, size_t cap) {
    const char *path = f->opt->graph_path;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    /* a refused allocation may surface as Lua's own message, or as an error in the handler */
    if (status == LUA_ERRMEM || (f->lua_refused && (status == LUA_ERRERR || (msg && !strcmp(msg, "not enough memory"))))) {
        if (f->lua_refused)
            snprintf(out, cap, "%s: the graph file's Lua state ran past its limit of %lld MiB (mmc compile --lua-memory "
                               "MiB raises it)", path, (long long)(f->lua_memory >> 20));
        else snprintf(out, cap, "%s: out of memory running the graph file", path);
        return;
    }
    if (!msg) {
        snprintf(out, cap, "%s: the graph file raised an error that is no message (a %s)", path, luaL_typename(L, -1));
        return;
    }
    size_t n = strlen(path);
    int placed = names_a_place(msg) || (!strncmp(msg, path, n) && msg[n] == ':');
    size_t k = placed ? 0 : (size_t)snprintf(out, cap, "%s: ", path);
    if (k >= cap) k = cap - 1;
    for (const unsigned char *c = (const unsigned char *)msg; *c && k + 5 < cap; c++) {
        if (*c == '\n') k += (size_t)snprintf(out + k, cap - k, "\\n");
        else if (*c < ' ' || *c == 127) k += (size_t)snprintf(out + k, cap - k, "\\x%02x", *c);
        else out[k++] = (char)*c;
    }
    out[k] = 0;
}

/* a path the plan carries (the graph's, the policy's) is one word of its line */
static void check_path_word(const char *path, const char *what) {
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c <= ' ' || *c == 127)
            die("%s: the %s's path may hold no spaces or control characters (a plan line keeps it between spaces)",
                path, what);
}

static void add_root(Front *f, const char *dir, const char *what) {
    char *real = realpath(dir, NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(real);
        die("%s %s: no such folder", what, dir);
    }
    f->roots = xrealloc(f->roots, (size_t)(f->n_roots + 1) * sizeof *f->roots);
    f->roots[f->n_roots++] = real;
}

static void front_free(Front *f) {
    for (int i = 0; i < f->n_roots; i++) free(f->roots[i]);
    free(f->roots);
    free(f->define_used);
    names_free(&f->param_names);
}

Graph *frontend_load(const FrontendOptions *opt) {
    check_path_word(opt->graph_path, "graph file");
    if (opt->policy_path) check_path_word(opt->policy_path, "policy file");
    Front f = {0};
    f.opt = opt;
    f.lua_memory = (size_t)(opt->lua_memory > 0 ? opt->lua_memory : FRONTEND_LUA_MEMORY);
    f.lua_steps = opt->lua_steps > 0 ? opt->lua_steps : FRONTEND_LUA_STEPS;
    f.max_nodes = opt->max_nodes > 0 ? opt->max_nodes : FRONTEND_MAX_NODES;
    /* the folders include reads below: the graph's and the -I folders; a caller that gives no
     * list (the tests, whose graphs in build/tests/tmp include graphs/tiny.lua) gets the
     * working folder in their place, while `mmc compile` always gives one */
    if (access(opt->graph_path, F_OK) != 0) die("%s: cannot open graph file: %s", opt->graph_path, strerror(errno));
    char *dir = path_dirname(opt->graph_path);
    add_root(&f, dir, "the graph's folder");
    free(dir);
    if (!opt->include_dirs) add_root(&f, ".", "the working folder");
    for (int i = 0; i < opt->n_include_dirs; i++) add_root(&f, opt->include_dirs[i], "-I");
    const char *base = strrchr(opt->graph_path, '/');
    base = base ? base + 1 : opt->graph_path;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
    char *name = xstrndup(base, n);
    f.g = ir_graph_new(name, opt->graph_path);
    free(name);
    f.define_used = xcalloc((size_t)opt->n_defines + 1, sizeof(int));
    train_defaults(&f.g->train);
    sha256_init(&f.hash);
    lua_State *L = lua_newstate(budget_alloc, &f);
    if (!L) die("cannot create a Lua state");
    *(Front **)lua_getextraspace(L) = &f;
    f.L = L;
    lua_sethook(L, step_hook, STEP_HOOKS, STEP_HOOK_EVERY);
    lua_pushcfunction(L, add_place);
    lua_pushcfunction(L, protected_load);
    int status = lua_pcall(L, 0, 0, 1);
    if (status != LUA_OK) {
        char line[4096];
        error_line(L, &f, status, line, sizeof line);
        lua_close(L);
        front_free(&f);
        die("%s", line);
    }
    lua_close(L);
    for (int i = 0; i < opt->n_defines; i++) {
        if (f.define_used[i]) continue;
        StrBuf b = {0};
        for (int k = 0; k < f.g->n_config; k++) sb_printf(&b, "%s%s", k ? ", " : "", f.g->config[k].key);
        char line[4096];
        snprintf(line, sizeof line, "-D %s: %s has no config key '%s' (keys: %s)", opt->defines[i].key, opt->graph_path,
                 opt->defines[i].key, b.s ? b.s : "none");
        sb_free(&b);
        front_free(&f);
        die("%s", line);
    }
    for (int i = 0; i < opt->n_defines; i++) {
        sha256_update(&f.hash, opt->defines[i].key, strlen(opt->defines[i].key) + 1);
        sha256_update(&f.hash, opt->defines[i].value, strlen(opt->defines[i].value) + 1);
    }
    for (int i = 0; i < opt->n_train_settings; i++) {
        const Define *d = &opt->train_settings[i];
        const TrainSetting *s = NULL;
        for (int k = 0; k < n_train_settings; k++)
            if (!strcmp(train_settings[k].key, d->key)) s = &train_settings[k];
        char *err = s ? train_setting_parse(&f.g->train, s, d->value) : xasprintf("no training setting '%s'", d->key);
        if (err) {
            char line[4096];
            snprintf(line, sizeof line, "%s: %s", opt->graph_path, err);
            free(err);
            front_free(&f);
            die("%s", line);
        }
        sha256_update(&f.hash, "train", 6);
        sha256_update(&f.hash, d->key, strlen(d->key) + 1);
        sha256_update(&f.hash, d->value, strlen(d->value) + 1);
    }
    if (opt->schedule) { /* the caller's, over train{}'s; it keeps it */
        const PrecisionSchedule *ps = opt->schedule;
        PrecisionSchedule *mine = f.g->train.precision ? f.g->train.precision : xcalloc(1, sizeof *mine);
        mine->n_phases = ps->n_phases, mine->phases = ps->phases, mine->where = ps->where;
        f.g->train.precision = mine;
        sha256_update(&f.hash, "schedule", 9);
        for (int i = 0; i < ps->n_phases; i++) {
            char updates[32];
            snprintf(updates, sizeof updates, "%lld", (long long)ps->phases[i].updates);
            sha256_update(&f.hash, updates, strlen(updates) + 1);
            sha256_update(&f.hash, ps->phases[i].policy, strlen(ps->phases[i].policy) + 1);
        }
    }
    for (int i = 0; i < f.g->n_params; i++) f.g->params[i].node->dtype = f.g->params[i].node->compute = f.g->policy.master;
    char *bad_setting = train_settings_check(&f.g->train); /* a value the update kernels cannot take */
    if (bad_setting) {
        char line[4096];
        snprintf(line, sizeof line, "%s: train: %s", f.g->train.where ? f.g->train.where : opt->graph_path, bad_setting);
        front_free(&f);
        die("%s", line);
    }
    front_free(&f);
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
