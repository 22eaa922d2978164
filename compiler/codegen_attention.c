/* codegen_attention: attention and its two backward kernels. The flash kernels (tensor
 * cores, f16 or bf16 tensors, head_dim a multiple of 16 up to 128) are the default; the f32
 * and f64 policies, other head sizes and --reference-kernels attention take the exact
 * kernels, one block per row. The tile sizes are decided in the launch step and passed to the
 * templates, which derive everything from them; the shared memory they need is the sum of
 * their tiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"

static const Shape *query_shape(const Node *a) { return &a->in[a->op == OP_ATTENTION ? 0 : 1]->shape; }

int attention_flash(const Node *a, DType part, unsigned reference) {
    DType c = a->compute;
    int64_t hd = query_shape(a)->dim[2] / a->a.heads;
    if ((reference & REF_ATTENTION) || (c != DT_F16 && c != DT_BF16) || hd % 16 || hd > 128) return 0;
    for (int k = 0; k < a->n_in; k++)
        if ((op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != c) return 0;
    for (int k = 0; k < a->n_in; k++)
        if (!(op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != DT_F32) return 0; /* lse, dsum */
    if (a->dtype != c) return 0;
    switch (a->op) {
    case OP_ATTENTION: return part == DT_NONE || part == DT_F32;        /* lse, where kept */
    case OP_ATTENTION_BACKWARD_DQ: return part == DT_F32;                /* dsum */
    default: return part == c;                                           /* dv */
    }
}

/* an operand the flash kernels take dense, rows H * HD (or KV * HD) apart */
static const char *flash_operand(Gen *G, const Node *n) {
    if (n->ld) die("internal error: the flash kernels take %s dense, not with rows %lld apart", node_label(n), (long long)n->ld);
    return ptr(G, n);
}

void launch_attention(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    int fwd = a->op == OP_ATTENTION, dq = a->op == OP_ATTENTION_BACKWARD_DQ;
    const Shape *q = query_shape(a);
    int64_t bsz = q->dim[0], t = q->dim[1], hd = q->dim[2] / a->a.heads, pitch = hd + 8;
    int flash = attention_flash(a, fwd ? (part_of(gr, 1) ? part_of(gr, 1)->dtype : DT_NONE) : need_part(gr, 1)->dtype,
                                G->reference);
    size_t rsize = G->reg_f64 ? 8 : 4;
    gr->block = 128; /* four warps; the flash kernels' tiles are laid out for them */
    if (fwd) {
        if (flash) {
            /* one 16-row tile a warp: 128 registers a thread, so 4 blocks (16 warps) share
             * an SM and hide each other's latencies (two tiles a warp took 254 registers, 2
             * blocks an SM, and measured 10% slower) */
            int64_t mt = 1, br = 64 * mt, bc = 64;
            tile(gr, "MIN_BLOCKS", hd <= 64 ? 4 : 1), tile(gr, "MT", mt), tile(gr, "BR", br), tile(gr, "BC", bc);
            gr->grid = bsz * a->a.heads, gr->grid_y = (t + br - 1) / br;
            gr->smem = (br + 4 * bc) * pitch * 2;
            gr->tmpl = "attention_flash.cu";
        } else {
            gr->grid = bsz * a->a.heads * t;
            gr->smem = (int64_t)((t + hd) * rsize);
            gr->tmpl = "attention.cu";
        }
    } else if (dq) {
        if (flash) {
            /* key tiles of 32: up to 64 wide heads then fit 4 blocks an SM in registers
             * (128 each) without spilling; wider ones take what they need */
            int64_t bc = 32;
            tile(gr, "BC", bc), tile(gr, "MIN_BLOCKS", hd <= 64 ? 4 : 1);
            gr->grid = bsz * a->a.heads, gr->grid_y = (t + 63) / 64;
            gr->smem = (2 * 64 + 4 * bc) * pitch * 2 + 64 * 4;
            gr->tmpl = "attention_backward_dq_flash.cu";
        } else {
            gr->grid = bsz * a->a.heads * t;
            gr->smem = (int64_t)((t + 2 * hd) * rsize);
            gr->tmpl = "attention_backward_dq.cu";
        }
    } else {
        if (flash) {
            /* under eager rounding each query head's share of dk and dv is rounded before the
             * group's sum, as PyTorch rounds what SDPA returns for each repeated kv head */
            /* query tiles of 64 up to 64 wide heads: 218 registers, 2 blocks an SM (tiles of
             * 32 fit 3 blocks in 168 registers, and measured slower) */
            int64_t bq = hd <= 64 ? 64 : 32, round_heads = G->eager && a->a.heads > a->a.kv_heads;
            tile(gr, "BQ", bq), tile(gr, "ROUND_HEADS", round_heads);
            gr->grid = bsz * a->a.kv_heads, gr->grid_y = (t + 63) / 64;
            /* the k and v tiles, whose bytes hold the rounded shares once k and v sit in
             * registers (hd <= 64), then the q and dO tiles and the stats */
            int64_t kv = 2 * 64 * pitch * 2, sums = round_heads ? 2 * hd / 8 * 4 * 128 * 4 : 0;
            int64_t head = round_heads && hd <= 64 ? (kv > sums ? kv : sums) : kv + sums;
            gr->smem = head + 4 * bq * pitch * 2 + 4 * bq * 4;
            gr->tmpl = "attention_backward_dkv_flash.cu";
        } else {
            gr->grid = bsz * a->a.kv_heads * t;
            gr->smem = (int64_t)((2 * t + 2 * hd) * rsize);
            gr->tmpl = "attention_backward_dkv.cu";
        }
    }
}

/* The functor a flash backward kernel stores each element of dq (or dk) through: as it is,
 * or, with rope_backward r fused into the kernel (pass_fusion's step 6), r's value from the
 * element and its partner HD / 2 away, with rope_backward_wide.cu's arithmetic and its
 * roundings: the attention's result to its dtype, each branch to x's. The struct goes before
 * the kernel (EPI_DEF); EPI makes one. */
static void store_functor(Gen *G, Keys *ks, const Node *a, const Node *r, int64_t hd) {
    if (!r) {
        key(ks, "EPI_DEF", "%s", "");
        key(ks, "EPI", "%s", "flash::AsIs{}");
        return;
    }
    const char *name = G->gr->kernel;
    char *rda = xstrdup(rounder(G, a->dtype)), *rdc = xstrdup(rounder(G, r->compute)), *rdx = xstrdup(rounder(G, r->a.to));
    char *label = xstrdup(node_label(r));
    key(ks, "EPI_DEF",
        "// %s, applied to each element as the kernel stores it (rope_backward_wide.cu's arithmetic):\n"
        "// d is element j of the row at position t, dp the element %lld columns away\n"
        "struct %s_rope {\n"
        "    const float *cs, *sn; // [T, %lld] each\n"
        "    static constexpr bool PAIRS = true;\n"
        "    __device__ __forceinline__ float operator()(float d, float dp, int t, int j) const {\n"
        "        const float da = %s(d), db = %s(dp);\n"
        "        const float direct = %s(%s(mmc_mul(da, cs[t * %lld + j])));\n"
        "        const float rot = %s(%s(mmc_mul(db, sn[t * %lld + (j < %lld ? j + %lld : j - %lld)])));\n"
        "        return mmc_add(direct, j < %lld ? rot : -rot);\n"
        "    }\n"
        "};\n",
        label, (long long)(hd / 2), name, (long long)hd, rda, rda, rdx, rdc, (long long)hd, rdx, rdc, (long long)hd,
        (long long)(hd / 2), (long long)(hd / 2), (long long)(hd / 2), (long long)(hd / 2));
    char *cs = xstrdup(ptr(G, r->in[1])), *sn = xstrdup(ptr(G, r->in[2]));
    key(ks, "EPI", "%s_rope{%s, %s}", name, cs, sn);
    free(rda), free(rdc), free(rdx), free(label), free(cs), free(sn);
}

void gen_attention(Gen *G, Keys *ks, Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    int fwd = a->op == OP_ATTENTION, dq = a->op == OP_ATTENTION_BACKWARD_DQ;
    const Shape *q = query_shape(a);
    int64_t t = q->dim[1], hd = q->dim[2] / a->a.heads;
    int flash = strstr(gr->tmpl, "_flash.cu") != NULL; /* the launch step's choice */
    G->uses_flash |= flash;
    Node *rope = NULL; /* a rope_backward the kernel applies as it stores dq or dk */
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op == OP_ROPE_BACKWARD) rope = gr->nodes[i];
    if (rope && !flash) die("internal error: %s: a rope_backward in an exact attention kernel", gr->kernel);
    char *sc = literal(G, 1.0 / sqrt((double)hd));
    key(ks, "T", "%lld", (long long)t);
    key(ks, "H", "%d", a->a.heads);
    key(ks, "KV", "%d", a->a.kv_heads);
    key(ks, "HD", "%lld", (long long)hd);
    key(ks, "SCALE", "%s", sc);
    key(ks, "CAUSAL", "%d", a->a.causal ? 1 : 0);
    /* the exact kernels read and write through ld and st, which take strided views; the flash
     * kernels walk rows themselves, and take v's and dv's row strides */
    const char *(*at)(Gen *, const Node *) = flash ? flash_operand : ptr;
    if (flash) key(ks, "E", "%s", dtype_cuda(a->compute));
    if (flash) key(ks, "VS", "%lldL", (long long)node_row_stride(a->in[fwd ? 2 : 3]));
    if (flash && !fwd && !dq) key(ks, "DVS", "%lldL", (long long)node_row_stride(need_part(gr, 1)));
    if (fwd) {
        key(ks, "Q", "%s", at(G, a->in[0]));
        key(ks, "K", "%s", at(G, a->in[1]));
        key(ks, "V", "%s", flash ? ptr_raw(G, a->in[2]) : ptr(G, a->in[2]));
        key(ks, "O", "%s", at(G, a));
        Node *lse = part_of(gr, 1);
        if (flash) key(ks, "LSE", "%s", lse ? ptr(G, lse) : "(float *)0");
        else if (lse) key(ks, "STORE_LSE", "st(%s, bh * %lld + i, m + mmc_log(l));", ptr(G, lse), (long long)t);
        else key(ks, "STORE_LSE", "{}");
    } else if (dq) {
        key(ks, "DO", "%s", at(G, a->in[0]));
        key(ks, "Q", "%s", at(G, a->in[1]));
        key(ks, "K", "%s", at(G, a->in[2]));
        key(ks, "V", "%s", flash ? ptr_raw(G, a->in[3]) : ptr(G, a->in[3]));
        key(ks, "O", "%s", at(G, a->in[4]));
        key(ks, "LSE", "%s", ptr(G, a->in[5]));
        key(ks, "DQ", "%s", rope ? ptr_raw(G, rope) : at(G, a));
        key(ks, "DSUM", "%s", ptr(G, need_part(gr, 1)));
        if (flash) key(ks, "DQS", "%lldL", (long long)(rope ? node_row_stride(rope) : (int64_t)a->a.heads * hd));
        if (flash) store_functor(G, ks, a, rope, hd);
    } else {
        key(ks, "DO", "%s", at(G, a->in[0]));
        key(ks, "Q", "%s", at(G, a->in[1]));
        key(ks, "K", "%s", at(G, a->in[2]));
        key(ks, "V", "%s", flash ? ptr_raw(G, a->in[3]) : ptr(G, a->in[3]));
        key(ks, "LSE", "%s", ptr(G, a->in[4]));
        key(ks, "DSUM", "%s", ptr(G, a->in[5]));
        key(ks, "DK", "%s", rope ? ptr_raw(G, rope) : at(G, a));
        if (flash) key(ks, "DKS", "%lldL", (long long)(rope ? node_row_stride(rope) : (int64_t)a->a.kv_heads * hd));
        if (flash) store_functor(G, ks, a, rope, hd);
        key(ks, "DV", "%s", flash ? ptr_raw(G, need_part(gr, 1)) : ptr(G, need_part(gr, 1)));
    }
    free(sc);
}
