/* frontend_internal: what the frontend's files share: the loading state, and the helpers
 * that turn Lua values into nodes, shapes and options with errors at the caller's line. */
#ifndef MMC_FRONTEND_INTERNAL_H
#define MMC_FRONTEND_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>

#include "frontend.h"
#include "util.h"

/* The parameters' state-dict names and second names (tie), hashed, so that a graph of many
 * parameters is checked for a name used twice in time linear in their number. */
typedef struct NameSet {
    const char **key; /* NULL: free slot; the strings are the graph's */
    int *param;       /* the parameter that has the name */
    int n, cap;       /* cap: 0 or a power of two */
} NameSet;

typedef struct Front {
    Graph *g;
    const FrontendOptions *opt;
    int *define_used;
    int config_seen;
    int policy_set;      /* a policy was loaded (by --policy or `precision`) */
    int in_policy_file;  /* rules made now belong to the policy, below the graph's own */
    int n_policy_rules, n_graph_rules;
    Sha256 hash;         /* over every source text the graph depends on */
    NameSet param_names;
    /* the limits (frontend.h) and what was used of them */
    lua_State *L;
    size_t lua_bytes, lua_memory;
    int lua_refused;     /* an allocation was refused for the limit */
    int64_t steps, lua_steps;
    int max_nodes;
    int64_t numel;       /* elements of every node made so far */
    char **roots;        /* real paths of the folders include may read below: the graph's, -I */
    int n_roots;
} Front;

Front *front_of(lua_State *L);
/* "graphs/minimind.lua:42", or "...:44 (in proj, :29)" from inside a helper function */
char *where_of(lua_State *L);
void push_node(lua_State *L, Node *n);
Node *check_node(lua_State *L, int idx, const char *fn, const char *what);
/* runs the node's shape rule (an error names its line) and pushes it */
Node *finish(lua_State *L, Node *n);
Shape check_shape(lua_State *L, int idx, const char *fn);
/* the node's element count is at most IR_MAX_NUMEL (and the graph's IR_MAX_GRAPH_NUMEL),
 * else an error at its line naming the shape */
void check_numel(lua_State *L, Node *n);
/* `name` is a name (letters, digits, _ . - : /, at most FRONTEND_MAX_NAME bytes), else an
 * error naming the first bad character and its place */
void check_name(lua_State *L, const char *fn, const char *name, size_t len);
/* `s` holds no space or control character (a plan line keeps it between spaces) */
void check_word(lua_State *L, const char *fn, const char *what, const char *s, size_t len);
/* s (malloc'd) moved into the Lua state, for a message raised next: freed here, and the
 * copy lives on the stack, so an error leaves no C memory behind */
const char *front_keep(lua_State *L, char *s);
/* work a DSL function does in C counts against the step limit as Lua instructions do */
void front_charge(lua_State *L, int64_t steps);
/* Pushes the path (for messages and chunk names) and the text of the file `rel` names for
 * include or precision: below `dir`, else below an -I folder; it must be a regular file
 * whose real path lies below the graph's folder or an -I folder, else an error. Returns 0,
 * pushing nothing, when there is no such file. */
int read_graph_source(lua_State *L, const char *fn, const char *dir, const char *rel);
/* Pushes the text of a file named on the command line (the graph, --policy), or an error. */
void push_named_file(lua_State *L, const char *path, const char *what);
void names_free(NameSet *s);
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
/* train{}'s precision schedule (the table at idx) and fallback, into t->precision
 * (frontend_schedule.c) */
void frontend_schedule(lua_State *L, int idx, TrainConfig *t);
void frontend_fallback(lua_State *L, int idx, TrainConfig *t);

#endif
