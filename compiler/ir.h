/* ir: the graph of nodes that every pass reads and rewrites. A node is one op applied to
 * input nodes, with attributes, a shape, a storage dtype, the dtype it computes in, a
 * user-visible name and the Lua file:line that made it. The graph keeps its nodes in
 * topological order; passes rebuild that list rather than patching it. */
#ifndef MMC_IR_H
#define MMC_IR_H

#include <stdint.h>

#include "dtype.h"
#include "train_settings.h"
#include "model.h"
#include "ops.h"

enum { IR_MAX_INPUTS = 6, IR_MAX_DIMS = 6 };

typedef struct Shape {
    int rank;
    int64_t dim[IR_MAX_DIMS];
} Shape;

typedef struct Node Node;
struct Node {
    int id;
    Op op;
    int n_in;
    Node *in[IR_MAX_INPUTS];
    Attrs a;
    Shape shape;
    DType dtype;   /* storage dtype of the result */
    DType compute; /* dtype the op computes on: its inputs' common dtype after casts */
    char *name;    /* "model.layers.0.self_attn.q_proj"; generated names start with '%' */
    char *where;   /* "graphs/minimind.lua:42" */
    int backward;  /* made by autodiff */
    int explicit_cast; /* a cast written in the graph file, which rules never change */
    int param_index;   /* param: position in the parameter list, else -1 */
    int rule;          /* precision: index of the policy rule that decided it, else -1 */
    int merged;        /* merge: MERGED_SLICE, a slice that was a GEMM of its own (a projection,
                          a weight gradient); MERGED_GEMM, the GEMM that does their work */
    /* pass results */
    int group;        /* fusion: index of the kernel group, -1 for leaves */
    int materialized; /* memplan: the value is written to memory (not only kept in registers) */
    int buffer;       /* memplan: Buffer id */
    int64_t offset;   /* memplan: byte offset in the buffer */
    int64_t ld;       /* memplan: elements from one row (last dim) to the next where they lie
                         further apart than the last dim (a slice of the last dim, or an input of
                         a concat along it); 0: dense */
    int mark;         /* scratch for passes */
};

enum { MERGED_SLICE = 1, MERGED_GEMM = 2 };

typedef struct Param {
    Node *node;
    int64_t offset; /* elements into the flat parameter buffer */
    char *alias;    /* a second state-dict name of the same tensor (a tied weight), or NULL */
} Param;

typedef struct ConfigEntry {
    char *key;
    double value;
    char *text; /* set for string values */
} ConfigEntry;

typedef struct Rule {
    char *op;      /* op name, or NULL */
    char *cls;     /* precision class name, or NULL */
    char *name;    /* glob on node names, or NULL */
    char *compute; /* "f16", "bf16", "f32", "f64", "follow", "promote" */
    int priority;
    int order;     /* later rules win ties */
    char *where;
} Rule;

typedef struct Policy {
    char *name;
    char *source;         /* file that defined it */
    int round_eager;      /* 1: round where PyTorch eager rounds; 0: fp32 inside fused kernels */
    DType master;         /* dtype of master weights and optimizer state */
    DType at_least;       /* every float value is widened to at least this dtype, explicit casts
                             and constants included (DT_NONE: no floor) */
    Rule *rules;
    int n_rules, cap_rules;
} Policy;

typedef struct Graph {
    char *name;    /* "minimind" */
    char *source;  /* path of the graph file */
    Node **nodes;  /* topological order */
    int n_nodes, cap_nodes;
    int next_id;
    Node *loss;
    Param *params;
    int n_params, cap_params;
    ConfigEntry *config;
    int n_config, cap_config;
    Policy policy;
    TrainConfig train;
    char *hash;    /* SHA-256 of everything the plan depends on */
    /* what the runtime needs beside the graph (model.h): the input of each role or NULL,
     * model{}, and the config.json fields of checkpoint_config{} and export_hf{} */
    Node *role[ROLE_COUNT];
    ModelInfo model;
    JsonFields json[JF_COUNT];
} Graph;

Graph *ir_graph_new(const char *name, const char *source);
/* Makes a node and appends it to the graph. Shape and dtype rules run in ir_finish. */
Node *ir_node(Graph *g, Op op, int n_in, Node **in, const char *where);
Node *ir_node1(Graph *g, Op op, Node *a, const char *where);
/* Runs the op's shape rule; returns NULL or an error message (caller reports it). */
char *ir_infer_shape(Node *n);
/* For nodes made after the precision pass: compute = native promotion, dtype = op rule. */
void ir_infer_dtype(Node *n);

/* The most elements one value may have, 2^40 (8 TiB as f64), and all the graph's file-made
 * values together, 2^44: so every byte count and offset the passes add up, the backward
 * pass's too, stays far inside int64. The frontend checks both where a node is made. */
#define IR_MAX_NUMEL ((int64_t)1 << 40)
#define IR_MAX_GRAPH_NUMEL ((int64_t)1 << 44)

int64_t shape_numel(const Shape *s);
/* shape_numel, or -1 where a dim is below 1 or the product passes IR_MAX_NUMEL */
int64_t shape_numel_checked(const Shape *s);
int shape_eq(const Shape *a, const Shape *b);
Shape shape_make(int rank, ...);
char *shape_str(const Shape *s); /* "[4,32,64]" (caller frees) */
/* b is a suffix of a after dropping leading dims (numpy broadcasting without size-1 dims). */
int shape_is_suffix(const Shape *a, const Shape *b);

const char *node_label(const Node *n); /* its name or "%<id>" */
int node_is_view(const Node *n);        /* a slice or a concat: memory of other nodes, no code */
int node_adds_to_grads(const Node *n);  /* grad_accumulate or linear_dw_add: writes the gradient buffer */
/* the input an anchor's kernel may write its result over (op_info.overwrites), or NULL */
const Node *node_overwritable_input(const Node *n);
int64_t node_row_stride(const Node *n); /* elements between its rows in memory: ld, or the last dim */
int64_t node_mem_index(const Node *n, int64_t i); /* where element i lies from the first, in elements */
int64_t node_extent_bytes(const Node *n);          /* from its first element to the end of its last */
/* The layout rules of the views, for memplan to place them and plan_read to check them: a
 * slice's first byte from its input's, with its ld (rows of a dense input, or columns of any),
 * and the first byte of a concat's input k from the concat's, whose ld is the concat's last
 * dim along axis 1 and 0 along axis 0. */
int64_t slice_offset(const Node *s, int64_t *ld);
int64_t concat_part_offset(const Node *cat, int k);
int64_t concat_part_ld(const Node *cat);
struct StrBuf;
void ir_attrs(struct StrBuf *o, const Node *n); /* the attributes its op uses, as " key=value" (attrs.h) */

#endif
