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

typedef struct FrontendOptions {
    const char *graph_path;
    const char *policy_path; /* --policy: replaces the graph's `precision` choice; NULL keeps it */
    Define *defines;         /* -D key=value */
    int n_defines;
} FrontendOptions;

Graph *frontend_load(const FrontendOptions *opt);

/* The built-in policies (graphs/policies/NAME.lua, embedded at build time), by name. */
const char *builtin_policy(const char *name);
const char *builtin_policy_names(void); /* "amp_fp16, fp32, ..." */

#endif
