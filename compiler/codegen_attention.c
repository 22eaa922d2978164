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

int attention_flash_fits(const Node *a, unsigned reference) {
    DType c = a->compute;
    int64_t hd = a->in[a->op == OP_ATTENTION ? 0 : 1]->shape.dim[2] / a->a.heads;
    if ((reference & REF_ATTENTION) || (c != DT_F16 && c != DT_BF16) || hd % 16 || hd > 128) return 0;
    for (int k = 0; k < a->n_in; k++)
        if ((op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != c) return 0;
    for (int k = 0; k < a->n_in; k++)
        if (!(op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != DT_F32) return 0; /* lse, dsum */
    return a->dtype == c;
}

/* an operand the flash kernels take dense, rows H * HD (or KV * HD) apart */
static const char *flash_operand(Gen *G, const Node *n) {
    if (n->ld) die("internal error: the flash kernels take %s dense, not with rows %lld apart", node_label(n), (long long)n->ld);
    return ptr(G, n);
}

static const Shape *query_shape(const Node *a) { return &a->in[a->op == OP_ATTENTION ? 0 : 1]->shape; }

void launch_attention(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    int fwd = a->op == OP_ATTENTION, dq = a->op == OP_ATTENTION_BACKWARD_DQ;
    const Shape *q = query_shape(a);
    int64_t bsz = q->dim[0], t = q->dim[1], hd = q->dim[2] / a->a.heads, pitch = hd + 8;
    int flash = attention_flash_fits(a, G->reference);
    if (fwd && flash && part_of(gr, 1) && part_of(gr, 1)->dtype != DT_F32) flash = 0; /* lse */
    if (dq && flash && need_part(gr, 1)->dtype != DT_F32) flash = 0;                    /* dsum */
    if (!fwd && !dq && flash && need_part(gr, 1)->dtype != a->dtype) flash = 0;          /* dv */
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
            /* heads of 64 on sm_90a take key tiles of 64 (flash_sm90::DQ_SMEM, from a 1024-byte
             * boundary), more than the mma.sync kernel's */
            if (hd == 64 && gr->smem < 6 * 8192 + 256 + 1024) gr->smem = 6 * 8192 + 256 + 1024;
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

/* the rope_backward of the anchor's output that runs in its kernel (pass_fusion's step 6) */
static Node *rope_out(const Group *gr) {
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op == OP_ROPE_BACKWARD && gr->nodes[i]->in[0] == gr->anchor) return gr->nodes[i];
    return NULL;
}

/* What the kernel writes its dq or dk with: flash::Plain, or the folded rope_backward `r` as
 * attention_rope_writer.cu defines it (OUT_DEF), which takes each staged row of a head as
 * rope_backward_wide.cu takes it from memory and rounds as that kernel does, so the bits are
 * the same. `stride_key` (DQS, DKS) is the row stride of what is written. */
static void rope_out_keys(Gen *G, Keys *ks, const Node *r, int64_t hd, const char *stride_key) {
    const Node *a = G->gr->anchor;
    key(ks, stride_key, "%lldL", (long long)node_row_stride(r ? r : a));
    if (!r) {
        key(ks, "OUT_DEF", "%s", "");
        key(ks, "OUT", "%s", "flash::Plain()");
        return;
    }
    Keys rk = {0};
    key(&rk, "NAME", "%s", G->gr->kernel);
    key(&rk, "LABEL", "%s", node_label(r));
    key(&rk, "ID", "%d", r->id);
    key(&rk, "E", "%s", dtype_cuda(a->dtype));
    key(&rk, "TAB", "%s", dtype_cuda(r->in[1]->dtype));
    key(&rk, "HALF", "%lld", (long long)(hd / 2));
    key(&rk, "HD", "%lld", (long long)hd);
    key(&rk, "RDC", "%s", rounder(G, r->compute));
    key(&rk, "RDX", "%s", rounder(G, r->a.to));
    key(&rk, "RDO", "%s", rounder(G, r->dtype));
    StrBuf def = {0};
    render(&def, "attention_rope_writer.cu", &rk);
    key(ks, "OUT_DEF", "%s", def.s);
    free(def.s);
    char *cs = xstrdup(ptr(G, r->in[1]));
    key(ks, "OUT", "%s_rope{%s, %s}", G->gr->kernel, cs, ptr(G, r->in[2]));
    free(cs);
}

void gen_attention(Gen *G, Keys *ks, Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    int fwd = a->op == OP_ATTENTION, dq = a->op == OP_ATTENTION_BACKWARD_DQ;
    const Shape *q = query_shape(a);
    int64_t t = q->dim[1], hd = q->dim[2] / a->a.heads;
    int flash = strstr(gr->tmpl, "_flash.cu") != NULL; /* the launch step's choice */
    Node *rope = rope_out(gr);
    if (rope && !flash) die("internal error: %s applies a rope_backward on the exact attention kernel", gr->kernel);
    /* the gradient the kernel writes: the anchor's, or the folded rope_backward's */
    const Node *written = rope ? rope : a;
    G->uses_flash |= flash;
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
        key(ks, "DQ", "%s", flash ? ptr_raw(G, written) : ptr(G, a));
        key(ks, "DSUM", "%s", ptr(G, need_part(gr, 1)));
        if (flash) rope_out_keys(G, ks, rope, hd, "DQS");
    } else {
        key(ks, "DO", "%s", at(G, a->in[0]));
        key(ks, "Q", "%s", at(G, a->in[1]));
        key(ks, "K", "%s", at(G, a->in[2]));
        key(ks, "V", "%s", flash ? ptr_raw(G, a->in[3]) : ptr(G, a->in[3]));
        key(ks, "LSE", "%s", ptr(G, a->in[4]));
        key(ks, "DSUM", "%s", ptr(G, a->in[5]));
        key(ks, "DK", "%s", flash ? ptr_raw(G, written) : ptr(G, a));
        key(ks, "DV", "%s", flash ? ptr_raw(G, need_part(gr, 1)) : ptr(G, need_part(gr, 1)));
        if (flash) rope_out_keys(G, ks, rope, hd, "DKS");
    }
    free(sc);
}
