/* codegen_launch: the launch step. For every kernel it picks the template and decides the
 * launch shape (grid, block, shared memory), whether it goes 8 elements a thread, and the tile
 * sizes and counts the template is filled with, before any code is written. `--dump launch`
 * shows what it decided, plan_write writes it, and codegen only fills the holes: a template's
 * block size is always its {{BLOCK}} and each tile its {{KEY}}, so nothing is assumed twice. */
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"
#include "passes.h"

void tile(Group *gr, const char *key, int64_t value) {
    for (int i = 0; i < gr->n_tiles; i++)
        if (!strcmp(gr->tiles[i].key, key)) {
            gr->tiles[i].value = value;
            return;
        }
    if (gr->n_tiles == GROUP_MAX_TILES) die("internal error: %s: more than %d tiles", gr->kernel, GROUP_MAX_TILES);
    gr->tiles[gr->n_tiles++] = (Tile){key, value};
}

int64_t tile_of(const Group *gr, const char *key) {
    for (int i = 0; i < gr->n_tiles; i++)
        if (!strcmp(gr->tiles[i].key, key)) return gr->tiles[i].value;
    die("internal error: %s has no tile %s", gr->kernel, key);
}

void launch_keys(const Group *gr, Keys *ks) {
    key(ks, "BLOCK", "%lld", (long long)gr->block);
    for (int i = 0; i < gr->n_tiles; i++) key(ks, gr->tiles[i].key, "%lld", (long long)gr->tiles[i].value);
}

/* Eight consecutive elements a thread, with 16-byte loads and stores, where every operand
 * allows it (elementwise_wide.cu); one element a thread otherwise. */
static void launch_elementwise(Gen *G) {
    Group *gr = G->gr;
    const Shape *space = &gr->nodes[gr->n_nodes - 1]->shape;
    gr->wide = !(G->reference & REF_WIDE) && wide_ok(G, gr->nodes, gr->n_nodes, space);
    gr->tmpl = gr->wide ? "elementwise_wide.cu" : "elementwise.cu";
    gr->block = 256;
    gr->grid = blocks_for(shape_numel(space) / (gr->wide ? 8 : 1), gr->block);
}

/* The segment tables (segments.cu): each segment has its own run of blocks of 8 elements a
 * thread, so that no block is idle. */
void launch_segments(Gen *G) {
    Group *gr = G->gr;
    gr->tmpl = "segments.cu";
    gr->block = 256;
    int64_t per_block = gr->block * 8, blocks = 0;
    for (int i = 0; i < gr->n_nodes; i++) blocks += (shape_numel(&gr->nodes[i]->shape) + per_block - 1) / per_block;
    tile(gr, "PER_BLOCK", per_block);
    gr->grid = blocks, gr->grid_y = 1;
}

/* The update phase: the grad-norm kernel takes a block per chunk of a parameter's gradient
 * (the chunks are memplan's, which sizes their scratch), AdamW 8 elements a thread, and
 * step_finish one thread. */
void launch_optimizer(Gen *G) {
    Group *gr = G->gr;
    const Graph *g = G->g;
    gr->block = 256;
    switch (gr->optimizer) {
    case OPT_GRAD_NORM:
        gr->tmpl = "grad_norm.cu";
        gr->grid = G->p->n_chunks;
        break;
    case OPT_ADAMW:
        gr->tmpl = "adamw.cu";
        gr->grid = blocks_for(G->p->buffer_bytes[BUF_PARAMS] / (int64_t)dtype_size(g->policy.master), gr->block * 8);
        break;
    default:
        gr->tmpl = "step_finish.cu";
        gr->grid = 1, gr->block = 1;
        break;
    }
}

void pass_launch(const Graph *g, Program *p, unsigned reference) {
    Gen G;
    gen_init(&G, g, p, reference);
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        begin_kernel(&G, gr);
        gr->n_tiles = 0;
        switch (gr->kind) {
        case GK_GEMM: /* a cuBLASLt call: its shape is the GEMM's (gemm_shape); or with its epilogue */
            if (gr->n_nodes > 1) launch_gemm_epilogue(&G);
            break;
        case GK_ELEMENTWISE: launch_elementwise(&G); break;
        case GK_CAST_PARAMS:
        case GK_GRADS: launch_segments(&G); break;
        case GK_OPTIMIZER: launch_optimizer(&G); break;
        case GK_ANCHOR: {
            const OpInfo *info = &op_info[gr->anchor->op];
            if (!info->launch) die("internal error: anchor %s has no launch function", info->name);
            Split s = split_group(&G);
            info->launch(&G, &s);
            free_split(&s);
            break;
        }
        default: die("internal error: group kind %d has no launch", (int)gr->kind);
        }
    }
    gen_free(&G);
}
