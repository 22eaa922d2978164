/* frontend_internal: what the frontend's files share: the loading state, and the helpers
 * that turn Lua values into nodes, shapes and options with errors at the caller's line. */
#ifndef MMC_FRONTEND_INTERNAL_H
#define MMC_FRONTEND_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>

#include "frontend.h"
#include "util.h"

typedef struct Front {
    Graph *g;
    const FrontendOptions *opt;
    int *define_used;
    int config_seen;
    int policy_set;      /* a policy was loaded (by --policy or `precision`) */
    int in_policy_file;  /* rules made now belong to the policy, below the graph's own */
    int n_policy_rules, n_graph_rules;
    Sha256 hash;         /* over every source text the graph depends on */
} Front;

Front *front_of(lua_State *L);
/* "graphs/minimind.lua:42", or "...:44 (in proj, :29)" from inside a helper function */
char *where_of(lua_State *L);
void push_node(lua_State *L, Node *n);
Node *check_node(lua_State *L, int idx, const char *fn, const char *what);
/* runs the node's shape rule (an error names its line) and pushes it */
Node *finish(lua_State *L, Node *n);
Shape check_shape(lua_State *L, int idx, const char *fn);
/* every key of the option table at idx is in `known` (NULL-terminated), else an error */
void check_options(lua_State *L, int idx, const char *fn, const char *const *known);
void opt_name(lua_State *L, int idx, Node *n);
Node *make(lua_State *L, Op op, int n_in, Node **in); /* a node at the caller's line */
void run_chunk(lua_State *L, const char *text, size_t len, const char *chunkname);

/* the DSL's functions, by concern */
extern const luaL_Reg frontend_graph_functions[];  /* frontend_ops.c */
extern const luaL_Reg frontend_policy_functions[]; /* frontend_policy.c */
extern const luaL_Reg frontend_train_functions[];  /* frontend_train.c */
extern const luaL_Reg frontend_model_functions[];  /* frontend_model.c */
void frontend_open_model(lua_State *L);            /* the `null` of config.json fields (frontend_model.c) */
/* gives input n the role of that name, or an error at its line (frontend_model.c) */
void frontend_set_role(lua_State *L, Node *n, const char *role);
/* after the file ran: model{}'s vocab is the one the embedding and the loss have */
void frontend_model_check(lua_State *L);
void frontend_open_init(lua_State *L);             /* the init table (frontend_ops.c) */
void load_policy(lua_State *L, const char *spec, const char *relative_to);
void train_defaults(TrainConfig *t);

#endif
