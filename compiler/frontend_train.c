/* frontend_train: the training settings: adamw{} and train{}, and their defaults. */
#include "frontend_internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
                                        "epochs", "log_interval", "fallback", NULL};
    static const char *const scale_known[] = {"init", "growth", "backoff", "interval", "max", "min", "hysteresis", "fixed", NULL};
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
    lua_getfield(L, 1, "schedule"); /* a table: the precision schedule; a string: the lr schedule */
    if (lua_istable(L, -1)) {
        frontend_schedule(L, -1, t);
    } else if (!lua_isnil(L, -1)) {
        const char *s = luaL_checkstring(L, -1);
        int sched = lr_schedule_parse(s);
        if (sched < 0)
            return luaL_error(L, "train: schedule must be %s, got '%s'", front_keep(L, word_list(lr_schedule_names)), s);
        t->schedule = (LrSchedule)sched;
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "fallback");
    if (!lua_isnil(L, -1)) frontend_fallback(L, -1, t);
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
        t->scale_max = field_num(L, s, "max", t->scale_max);
        t->scale_min = field_num(L, s, "min", t->scale_min);
        t->scale_hysteresis = (int)field_num(L, s, "hysteresis", t->scale_hysteresis);
        if (t->scale_init <= 0 || t->scale_growth < 1 || t->scale_backoff <= 0 || t->scale_backoff > 1 ||
            t->scale_interval < 1 || t->scale_max < 0 || t->scale_min < 0 || t->scale_hysteresis < 1)
            return luaL_error(L, "loss_scale: need init > 0, growth >= 1, 0 < backoff <= 1, interval >= 1, max >= 0 and "
                                 "min >= 0 (0: none), hysteresis >= 1");
        lua_getfield(L, s, "fixed");
        if (!lua_isnil(L, -1)) { /* a static scale: the one value, and nothing that would change it */
            static const char *const moves[] = {"init", "growth", "backoff", "interval", "max", "min", "hysteresis", NULL};
            for (int k = 0; moves[k]; k++) {
                lua_getfield(L, s, moves[k]);
                int given = !lua_isnil(L, -1);
                lua_pop(L, 1);
                if (given) return luaL_error(L, "loss_scale: fixed = S is a static scale; '%s' would change it", moves[k]);
            }
            double fixed = luaL_checknumber(L, -1);
            if (!(fixed > 0) || !isfinite(fixed)) return luaL_error(L, "loss_scale: fixed must be a scale above 0");
            t->scale_init = fixed, t->scale_fixed = 1;
        }
        lua_pop(L, 1);
        char *err = train_scaler_check(t);
        if (err) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", err);
            free(err);
            return luaL_error(L, "%s", msg);
        }
    } else if (!lua_isnil(L, -1)) {
        return luaL_error(L, "train: loss_scale must be a table { init, growth, backoff, interval, max, min, hysteresis } "
                             "or { fixed = S }");
    }
    lua_pop(L, 1);
    return 0;
}

void train_defaults(TrainConfig *t) {
    /* torch.optim.AdamW defaults with MiniMind's lr; GradScaler defaults; MiniMind's clip */
    t->lr = 5e-4, t->beta1 = 0.9, t->beta2 = 0.999, t->eps = 1e-8, t->weight_decay = 0.01;
    t->schedule = SCHED_MINIMIND_COSINE;
    t->clip = 1.0;
    t->loss_scaling = 1;
    t->scale_init = 65536.0, t->scale_growth = 2.0, t->scale_backoff = 0.5, t->scale_interval = 2000;
    t->scale_max = 0, t->scale_min = 0, t->scale_hysteresis = 1, t->scale_fixed = 0; /* none of them: GradScaler */
    t->accumulation = 1, t->epochs = 1, t->log_interval = 100;
}


const luaL_Reg frontend_train_functions[] = {
    {"adamw", l_adamw},
    {"train", l_train},
    {NULL, NULL},
};
