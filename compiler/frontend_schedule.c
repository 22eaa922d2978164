/* frontend_schedule: train{}'s precision schedule, `schedule = { {updates = N, policy = P},
 * ..., {policy = P} }` (a string there is the learning-rate schedule, frontend_train.c), and
 * its fallback, `fallback = { overflow_rate, window, min_scale, to }`, read into the graph's
 * PrecisionSchedule (precision_schedule.h). Each policy is found now, as `precision "file"`
 * finds one, so that a misspelt name is an error at the train{} line and not at the compile
 * of its phase. Every value is checked while it is a Lua value, and copied once all are good,
 * so that an error leaves no C memory behind. */
#include "frontend_internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "precision_schedule.h"
#include "util.h"

/* The policy on top of the stack, for `what`: a built-in's name stays as it is; a file's
 * name is replaced by the path it was found at (below the graph's folder, else below an -I
 * folder), which the phase's compile then reads as --policy reads a file. */
static void resolve_policy(lua_State *L, const char *what) {
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "train: %s: a policy is a built-in policy's name (%s) or a policy file's, got a %s", what,
                   builtin_policy_names(), luaL_typename(L, -1));
    size_t len;
    const char *spec = lua_tolstring(L, -1, &len);
    if (builtin_policy(spec)) return;
    check_word(L, "train", "the policy's path", spec, len); /* the plan's policy line holds it */
    Front *f = front_of(L);
    const char *dir = front_keep(L, path_dirname(f->opt->graph_path));
    if (!read_graph_source(L, "train", dir, spec))
        luaL_error(L, "train: %s: no built-in policy '%s' (%s) and no file %s below %s%s", what, spec, builtin_policy_names(),
                   spec, dir, f->opt->n_include_dirs && spec[0] != '/' ? " or an -I folder" : "");
    lua_pop(L, 1);      /* the text: the phase's compile reads it again */
    lua_replace(L, -3); /* the path, where the name was */
    lua_pop(L, 1);      /* the folder */
}

static PrecisionSchedule *schedule_of(TrainConfig *t) {
    if (!t->precision) t->precision = xcalloc(1, sizeof *t->precision);
    return t->precision;
}

void frontend_schedule(lua_State *L, int idx, TrainConfig *t) {
    static const char *const known[] = {"updates", "policy", NULL};
    idx = lua_absindex(L, idx);
    /* a list and nothing else: a key beside the phases would be a phase lost */
    lua_Integer n = luaL_len(L, idx), entries = 0;
    int list = 1;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        front_charge(L, 1);
        lua_pop(L, 1);
        entries++;
        list &= lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n;
    }
    if (!list || entries != n)
        luaL_error(L, "train: schedule = { ... } is the precision schedule, a list of phases { updates = N, policy = P } "
                      "(a string names the learning-rate schedule: %s)", front_keep(L, word_list(lr_schedule_names)));
    if (n < 2)
        luaL_error(L, "train: a precision schedule needs at least 2 phases, got %d (one policy for the whole run is "
                      "precision \"NAME\")", (int)n);
    if (n > PRECISION_MAX_PHASES)
        luaL_error(L, "train: a precision schedule has at most %d phases, got %d", (int)PRECISION_MAX_PHASES, (int)n);
    int base = lua_gettop(L);
    int64_t *updates = lua_newuserdatauv(L, (size_t)n * sizeof *updates, 0); /* the Lua state frees it on an error */
    lua_createtable(L, (int)n, 0); /* the phases' policies, found */
    for (int k = 1; k <= n; k++) {
        char label[32];
        snprintf(label, sizeof label, "schedule phase %d", k);
        lua_geti(L, idx, k);
        if (!lua_istable(L, -1))
            luaL_error(L, "train: %s must be a table { updates = N, policy = P }, got a %s", label, luaL_typename(L, -1));
        int ph = lua_gettop(L);
        lua_pushfstring(L, "train: %s", label);
        check_options(L, ph, lua_tostring(L, -1), known);
        lua_pop(L, 1);
        lua_getfield(L, ph, "updates");
        int whole = 0;
        lua_Integer u = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &whole) : 0;
        if (k == n && !lua_isnil(L, -1))
            luaL_error(L, "train: %s is the last: it runs to the end of the run, so it takes no updates", label);
        if (k < n && lua_isnil(L, -1))
            luaL_error(L, "train: %s needs updates = N, the optimizer updates it runs (only the last phase runs to the end)",
                       label);
        if (k < n && (!whole || u < 1 || u > (lua_Integer)1e15)) /* far from overflowing their sum */
            luaL_error(L, "train: %s: updates must be a whole number of optimizer updates, at least 1, got %s", label,
                       lua_type(L, -1) == LUA_TNUMBER ? luaL_tolstring(L, -1, NULL)
                                                      : lua_pushfstring(L, "a %s", luaL_typename(L, -1)));
        updates[k - 1] = k < n ? (int64_t)u : 0;
        lua_pop(L, 1);
        lua_getfield(L, ph, "policy");
        if (lua_isnil(L, -1))
            luaL_error(L, "train: %s needs policy = a built-in policy (%s) or a policy file", label, builtin_policy_names());
        resolve_policy(L, label);
        lua_rawseti(L, base + 2, k);
        lua_pop(L, 1);
    }
    PrecisionSchedule *s = schedule_of(t);
    for (int k = 0; k < s->n_phases; k++) free(s->phases[k].policy);
    free(s->phases);
    free(s->where);
    s->n_phases = (int)n;
    s->phases = xcalloc((size_t)n, sizeof *s->phases);
    for (int k = 0; k < n; k++) {
        lua_rawgeti(L, base + 2, k + 1);
        s->phases[k] = (SchedulePhase){updates[k], xstrdup(lua_tostring(L, -1))};
        lua_pop(L, 1);
    }
    s->where = xstrdup(t->where);
    lua_settop(L, base);
}

/* a number at idx, or nil (*given 0) */
static double opt_number(lua_State *L, int idx, const char *key, int *given, const char *need) {
    lua_getfield(L, idx, key);
    *given = !lua_isnil(L, -1);
    if (*given && lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "train: fallback: %s must be %s", key, need);
    double v = *given ? lua_tonumber(L, -1) : 0;
    lua_pop(L, 1);
    return v;
}

void frontend_fallback(lua_State *L, int idx, TrainConfig *t) {
    static const char *const known[] = {"overflow_rate", "window", "min_scale", "to", NULL};
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx))
        luaL_error(L, "train: fallback must be a table { overflow_rate = R, window = W, min_scale = S, to = POLICY or a "
                      "fixed loss scale }");
    check_options(L, idx, "train: fallback", known);
    int has_rate, has_window, has_min;
    double rate = opt_number(L, idx, "overflow_rate", &has_rate, "a share of the updates, 0 < R <= 1");
    char d[32];
    if (has_rate && !(rate > 0 && rate <= 1))
        luaL_error(L, "train: fallback: overflow_rate must be a share of the updates, 0 < R <= 1, got %s",
                   fmt_double(d, rate));
    double window = opt_number(L, idx, "window", &has_window, "a whole number of updates, at least 1");
    if (has_window && !(window >= 1 && window <= 1e15 && window == floor(window)))
        luaL_error(L, "train: fallback: window must be a whole number of updates, at least 1, got %s",
                   fmt_double(d, window));
    if (has_rate != has_window)
        luaL_error(L, "train: fallback: overflow_rate and window go together (fall back when more than R of W updates "
                      "overflow)");
    double min = opt_number(L, idx, "min_scale", &has_min, "a loss scale >= 0 (0: no scale condition)");
    if (!(min >= 0 && isfinite(min)))
        luaL_error(L, "train: fallback: min_scale must be a loss scale >= 0 (0: no scale condition), got %s",
                   fmt_double(d, min));
    if (!has_rate && !(min > 0))
        luaL_error(L, "train: fallback needs a condition: overflow_rate = R with window = W, or min_scale = S");
    lua_getfield(L, idx, "to");
    double scale = 0;
    if (lua_isnil(L, -1)) {
        luaL_error(L, "train: fallback needs to = a policy (%s, or a policy file) or a fixed loss scale",
                   builtin_policy_names());
    } else if (lua_type(L, -1) == LUA_TNUMBER) {
        scale = lua_tonumber(L, -1);
        if (!(scale > 0 && scale <= 1e38))
            luaL_error(L, "train: fallback: to = %s: a fixed loss scale must be above 0 (and at most 1e38)",
                       fmt_double(d, scale));
    } else {
        resolve_policy(L, "fallback");
    }
    PrecisionSchedule *s = schedule_of(t);
    free(s->to_policy);
    free(s->fallback_where);
    s->has_fallback = 1;
    s->overflow_rate = has_rate ? rate : 0;
    s->window = has_rate ? (int64_t)window : 0;
    s->min_scale = min;
    s->to_policy = scale > 0 ? NULL : xstrdup(lua_tostring(L, -1));
    s->to_scale = scale;
    s->fallback_where = xstrdup(t->where);
    lua_pop(L, 1);
}
