/* frontend: runs a graph file in an embedded Lua 5.4 state whose globals are the graph DSL
 * (config, input, param, ops, loss, precision rules, train settings). Lua only describes:
 * every DSL call makes nodes and checks shapes at once, so errors name the file:line. */
#ifndef MMC_FRONTEND_H
#define MMC_FRONTEND_H

#include "ir.h"

typedef struct Define {
    char *key;
    char *value;
} Define;

/* What a graph file may take, so that a file that loops, grows without end or asks for a
 * tensor no machine holds ends in one located error instead of a hang, a swapped-out machine
 * or a crash in `mmc train`. A step is a Lua instruction, a value passed to or returned from
 * a call, an element a library function loops over, or a byte the Lua state allocates. The
 * real graphs are far below: graphs/minimind.lua takes about 10^5 steps and 90 KiB. */
#define FRONTEND_LUA_MEMORY ((int64_t)1 << 30) /* bytes of the Lua state; --lua-memory MiB */
#define FRONTEND_LUA_STEPS ((int64_t)100000000) /* --lua-steps N */
enum {
    FRONTEND_MAX_NODES = 1000000, /* nodes (parameters among them) a graph file may make */
    FRONTEND_MAX_RULES = 10000,   /* precision rules, each matched against every node */
    FRONTEND_MAX_NAME = 255,      /* bytes of a name (a state-dict key is far shorter) */
};

typedef struct FrontendOptions {
    const char *graph_path;
    const char *policy_path; /* --policy: replaces the graph's `precision` choice; NULL keeps it */
    Define *defines;         /* -D key=value */
    int n_defines;
    /* -I DIR: `include` and `precision "file"` read below the graph's folder and these only;
     * NULL (a caller that gives no list, as the tests and plan_remake do): below the graph's
     * folder and the working folder */
    const char *const *include_dirs;
    int n_include_dirs;
    int64_t lua_memory; /* bytes; 0: FRONTEND_LUA_MEMORY */
    int64_t lua_steps;  /* 0: FRONTEND_LUA_STEPS */
    int max_nodes;      /* 0: FRONTEND_MAX_NODES (the tests lower it) */
    /* training settings given beside the graph file (mmc train --loss-scale-*): keys of
     * compiler/train_settings.h, each replacing what train{} set */
    const Define *train_settings;
    int n_train_settings;
    /* a precision schedule given beside the graph file (mmc compare), replacing train{}'s;
     * it is hashed into the plan as the file's would be */
    const struct PrecisionSchedule *schedule;
} FrontendOptions;

Graph *frontend_load(const FrontendOptions *opt);

/* The built-in policies (graphs/policies/NAME.lua, embedded at build time), by name. */
const char *builtin_policy(const char *name);
const char *builtin_policy_names(void); /* "amp_fp16, fp32, ..." */

#endif
