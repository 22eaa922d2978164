/* The plan file: reading a plan and writing it again gives the same bytes (the loader
 * keeps everything the compiler wrote); its hash follows every input (graph, -D, policy);
 * a plan changed after it was written is refused for its content hash, and a kernels.cu
 * that is not the plan's for the plan's kernels line; malformed plans, sealed again so that
 * what they hold is what is judged, are refused with the file and line. */
#include <setjmp.h>

#include "test_util.h"

static jmp_buf on_die;
static char last_error[1024];
static void hook(const char *msg) {
    snprintf(last_error, sizeof last_error, "%s", msg);
    longjmp(on_die, 1);
}

/* `text` with `what` put in before the end of the first line that starts with `line` */
static char *with_field(const char *text, const char *line, const char *what) {
    const char *at = strstr(text, line);
    if (!at) return xstrdup(text);
    size_t cut = (size_t)(strchr(at + 1, '\n') - text);
    return xasprintf("%.*s%s%s", (int)cut, text, what, text + cut);
}

/* `text` with its first `from` replaced by `to` */
static char *replaced(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    if (!at) return xstrdup(text);
    return xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

/* the line number, in `text`, of the first line that holds `what` */
static int line_of(const char *text, const char *what) {
    const char *at = strstr(text, what);
    int line = 1;
    for (const char *s = text; at && s < at; s++) line += *s == '\n';
    return line;
}

static CompileResult compile(const char *graph, const char *policy, const char *define) {
    CompileOptions o = {0};
    o.front.graph_path = graph;
    o.front.policy_path = policy;
    Define d = {"seq", (char *)define};
    if (define) o.front.defines = &d, o.front.n_defines = 1;
    return compile_graph(&o);
}

/* the text as it is: the content hash is judged first */
static void expect_refused_as_is(const char *what, const char *text, const char *want) {
    set_die_hook(hook);
    last_error[0] = 0;
    if (!setjmp(on_die)) {
        plan_read(text, "bad/plan");
        CHECK(0, "%s: accepted", what);
    } else {
        CHECK(strstr(last_error, want) != NULL, "%s: message '%s' lacks '%s'", what, last_error, want);
    }
    set_die_hook(NULL);
}

/* the text sealed again, as a plan mmc wrote with that content */
static void expect_refused(const char *what, const char *text, const char *want) {
    expect_refused_as_is(what, plan_seal(text), want);
}

/* `text` with the first `from` after the first `after` replaced by `to` */
static char *replaced_after(const char *text, const char *after, const char *from, const char *to) {
    const char *at = strstr(text, after);
    if (!at || !strstr(at, from)) return xstrdup(text);
    at = strstr(at, from);
    return xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

int main(void) {
    const char *policies[] = {"amp_fp16", "fp32", "fp16_wide", "fp64"};
    for (size_t i = 0; i < 4; i++) {
        CompileResult r = compile("graphs/tiny.lua", policies[i], NULL);
        Plan *pl = plan_read(r.plan, "tiny/plan");
        char *again = plan_write(pl->g, pl->p, r.kernels);
        CHECK(!strcmp(again, r.plan), "%s: the plan read back and written again differs", policies[i]);
        free(again);
    }
    CompileResult m = compile("graphs/minimind.lua", NULL, NULL);
    Plan *pm = plan_read(m.plan, "minimind/plan");
    char *again = plan_write(pm->g, pm->p, m.kernels);
    CHECK(!strcmp(again, m.plan), "minimind: the plan read back and written again differs");
    CHECK(strstr(m.kernels, m.g->hash) != NULL, "kernels.cu carries the plan's hash");
    CompileResult a = compile("graphs/tiny.lua", NULL, NULL), b = compile("graphs/tiny.lua", NULL, NULL);
    CompileResult c = compile("graphs/tiny.lua", NULL, "16"), d = compile("graphs/tiny.lua", "fp32", NULL);
    CHECK(!strcmp(a.g->hash, b.g->hash), "the same inputs give the same hash");
    CHECK(strcmp(a.g->hash, c.g->hash) && strcmp(a.g->hash, d.g->hash), "a -D or a policy changes the hash");

    /* what the runtime needs beside the graph comes back from the plan: the inputs by role,
     * model{}, and the config.json fields as JSON text */
    const Graph *mg = pm->g;
    CHECK(mg->role[ROLE_TOKENS] && !strcmp(mg->role[ROLE_TOKENS]->name, "input_ids") && mg->role[ROLE_TARGETS] &&
              !strcmp(mg->role[ROLE_TARGETS]->name, "labels"),
          "minimind: the roles do not name input_ids and labels");
    CHECK(mg->model.value[MF_VOCAB] == 6400 && mg->model.value[MF_PAD_ID] == 0 && mg->model.value[MF_BOS_ID] == 1 &&
              mg->model.value[MF_EOS_ID] == 2 && model_has(&mg->model, MF_MAX_POSITIONS),
          "minimind: model{} read back as vocab %lld pad %lld bos %lld eos %lld", (long long)mg->model.value[MF_VOCAB],
          (long long)mg->model.value[MF_PAD_ID], (long long)mg->model.value[MF_BOS_ID], (long long)mg->model.value[MF_EOS_ID]);
    int found = 0;
    for (int i = 0; i < mg->json[JF_CHECKPOINT].n; i++) {
        const JsonField *f = &mg->json[JF_CHECKPOINT].f[i];
        found |= !strcmp(f->key, "model_type") && !strcmp(f->json, "\"minimind\"");
    }
    CHECK(found && mg->json[JF_EXPORT_HF].n > 0, "minimind: the config.json fields did not come back");
    const char *model_line = strstr(a.plan, "\nmodel ");
    CHECK(model_line != NULL, "tiny: no model line");
    if (model_line) {
        char *no_model = xasprintf("%.*s%s", (int)(model_line - a.plan), a.plan, strchr(model_line + 1, '\n'));
        expect_refused("no model line", no_model, "recompile with mmc compile");
        char *tokens = xasprintf(" tokens=%%%d ", a.g->role[ROLE_TOKENS]->id);
        const char *at_tokens = strstr(a.plan, tokens);
        char *to_param = xasprintf("%.*s tokens=%%%d %s", (int)(at_tokens - a.plan), a.plan, a.g->params[0].node->id,
                                   at_tokens + strlen(tokens));
        expect_refused("a role on a parameter", to_param, "the role tokens names");
    }

    /* under eager rounding RoPE's gradients run in the flash kernels of dq and dk (pass_fusion's
     * step 6): every rope_backward of MiniMind is in the kernel of the attention gradient it
     * reads; a plan that puts one beside another anchor's output is refused */
    int folded = 0, ropes = 0;
    for (int i = 0; i < pm->g->n_nodes; i++) {
        const Node *n = pm->g->nodes[i];
        if (n->op != OP_ROPE_BACKWARD) continue;
        ropes++;
        const Group *gr = pm->p->groups[n->group];
        folded += gr->anchor == n->in[0] && op_info[gr->anchor->op].rope_out;
    }
    CHECK(ropes == 16 && folded == ropes, "minimind: %d of %d rope_backward ops in their attention gradient's kernel", folded,
          ropes);
    const char *rope_line = strstr(m.plan, " rope_backward in=%");
    CHECK(rope_line != NULL, "minimind: no rope_backward line");
    if (rope_line) {
        const char *first_in = rope_line + strlen(" rope_backward in=");
        char *own = xasprintf("%.*s", (int)strcspn(first_in, ","), first_in);
        char *from = xasprintf(" rope_backward in=%s,", own);
        /* the first input of the attention gradient's own line: dO, of the same shape */
        char *anchor_op = xasprintf("op %s attention_backward_", own);
        const char *anchor_line = strstr(m.plan, anchor_op);
        const char *dout = anchor_line ? strstr(anchor_line, " in=") + 4 : NULL;
        char *to = dout ? xasprintf(" rope_backward in=%.*s,", (int)strcspn(dout, ","), dout) : xstrdup(from);
        expect_refused("a rope_backward of another value in an attention kernel", replaced(m.plan, from, to),
                       "rope_backward in kernel");
        free(own), free(from), free(to), free(anchor_op);
    }

    /* the cross-entropy's gradient: by default a kernel of its own after the loss's, dividing
     * by target_count's count; with --fuse-loss-grad (pass_fusion's step 7) in the loss's
     * kernel, and the plan reads back; written over the logits either way */
    CompileOptions lg_opt = {0};
    lg_opt.front.graph_path = "graphs/minimind.lua";
    lg_opt.fuse_loss_grad = 1;
    CompileResult lg = compile_graph(&lg_opt);
    for (int fused = 0; fused < 2; fused++) {
        Plan *pl = fused ? plan_read(lg.plan, "minimind_lg/plan") : pm;
        const Node *grad = NULL;
        for (int i = 0; i < pl->g->n_nodes; i++)
            if (pl->g->nodes[i]->op == OP_CROSS_ENTROPY_BACKWARD) grad = pl->g->nodes[i];
        CHECK(grad && grad->in[4]->op == OP_TARGET_COUNT, "minimind: the loss gradient does not divide by target_count's count");
        if (!grad) continue;
        const Group *gr = pl->p->groups[grad->group];
        const Node *logits = grad->in[1];
        CHECK((gr->anchor->op == OP_CROSS_ENTROPY) == fused, "minimind%s: the loss gradient runs in kernel %s",
              fused ? " --fuse-loss-grad" : "", gr->kernel);
        CHECK(grad->materialized && grad->buffer == logits->buffer && grad->offset == logits->offset,
              "minimind%s: the loss gradient is not written over the logits", fused ? " --fuse-loss-grad" : "");
    }
    { /* a vocabulary too large for a lane's registers keeps two kernels, and a plan that puts
       * the gradient in the loss's kernel anyway is refused */
        CompileOptions o = lg_opt;
        o.front.graph_path = "graphs/tiny.lua";
        Define d = {"vocab", "8200"};
        o.front.defines = &d, o.front.n_defines = 1;
        CompileResult big = compile_graph(&o);
        const char *grad_line = strstr(big.plan, " cross_entropy_backward in=");
        const char *kernel_line = grad_line ? grad_line : NULL;
        while (kernel_line && kernel_line > big.plan && strncmp(kernel_line, "\nkernel ", 8)) kernel_line--;
        CHECK(grad_line && kernel_line && !strncmp(strchr(kernel_line, '_'), "_cross_entropy_backward", 23),
              "tiny at vocab 8200 --fuse-loss-grad: the loss gradient is not a kernel of its own");
        if (grad_line && kernel_line) { /* the gradient's kernel line dropped: its op joins the loss's kernel */
            const char *next = strchr(kernel_line + 1, '\n');
            char *joined = xasprintf("%.*s%s", (int)(kernel_line - big.plan), big.plan, next);
            expect_refused("a loss gradient too wide for the loss's kernel in it", joined, "cross_entropy_backward in kernel");
            free(joined);
        }
    }

    /* SwiGLU's forward is the epilogue of the merged gate/up projection (its two halves) by
     * default, its backward (dh = dy W_down, loading gate and up) only with --gemm-epilogues,
     * and none is with --no-gemm-epilogues (pass_epilogue.c); a plan whose epilogue reads
     * one half twice is refused */
    static const struct {
        int mode, fwd, bwd;
        const char *name;
    } epilogue_modes[] = {{GEMM_EPILOGUES_PRODUCT, 8, 0, "by default"},
                          {GEMM_EPILOGUES_ALL, 8, 8, "with --gemm-epilogues"},
                          {GEMM_EPILOGUES_NONE, 0, 0, "with --no-gemm-epilogues"}};
    CompileResult me = {0};
    for (int m = 0; m < 3; m++) {
        CompileOptions eo = {0};
        eo.front.graph_path = "graphs/minimind.lua";
        eo.gemm_epilogues = epilogue_modes[m].mode;
        CompileResult r = compile_graph(&eo);
        Plan *pe = plan_read(r.plan, "minimind-epilogues/plan");
        int fwd_epi = 0, bwd_epi = 0;
        for (int i = 0; i < pe->p->n_groups; i++) {
            const Group *gr = pe->p->groups[i];
            if (gr->kind != GK_GEMM || gr->n_nodes == 1) continue;
            GemmEpilogue e;
            CHECK(!gemm_epilogue_refusal(gr->anchor, gr->nodes + 1, gr->n_nodes - 1, 0, &e), "minimind: %s refused", gr->kernel);
            fwd_epi += gr->anchor->op == OP_LINEAR && e.paired && !e.loads;
            bwd_epi += gr->anchor->op == OP_LINEAR_DX && !e.paired && e.loads;
            /* three consumer warpgroups and the producer's where the epilogue loads nothing */
            CHECK(gr->block == (e.loads ? 384 : 512), "minimind: %s has %lld threads a block", gr->kernel, (long long)gr->block);
        }
        CHECK(fwd_epi == epilogue_modes[m].fwd && bwd_epi == epilogue_modes[m].bwd,
              "minimind %s: %d forward and %d backward SwiGLU epilogues, not %d and %d", epilogue_modes[m].name, fwd_epi, bwd_epi,
              epilogue_modes[m].fwd, epilogue_modes[m].bwd);
        if (epilogue_modes[m].mode == GEMM_EPILOGUES_ALL) me = r;
    }
    const char *silu = strstr(me.plan, " silu in=%");
    const char *mul = silu ? strstr(silu, " mul in=%") : NULL;
    CHECK(silu && mul, "minimind: no silu and mul lines");
    if (silu && mul) {
        const char *gate = silu + strlen(" silu in="), *up = strchr(mul, ',') + 1;
        char *from = xasprintf(" silu in=%.*s ", (int)strcspn(gate, " "), gate);
        char *to = xasprintf(" silu in=%.*s ", (int)strcspn(up, " "), up);
        expect_refused("an epilogue that reads one half of the product twice", replaced(me.plan, from, to),
                       "cannot have these ops as its epilogue: the epilogue reads neither the product nor its two halves");
        free(from), free(to);
    }

    /* target_count and embedding_sort read only the labels and the ids: scheduled first, on
     * the side stream, written as stream=1 on their kernel lines and on no other, and read back */
    int side = 0, side_ops = 0;
    for (int i = 0; i < pm->p->n_groups; i++) {
        const Group *gr = pm->p->groups[i];
        side += gr->stream;
        if (i < 2) {
            CHECK(gr->anchor && (gr->anchor->op == OP_EMBEDDING_SORT || gr->anchor->op == OP_TARGET_COUNT) && gr->stream == 1,
                  "minimind: kernel %d is %s on stream %d, not embedding_sort or target_count on the side stream", i, gr->kernel,
                  gr->stream);
            side_ops |= gr->anchor ? 1 << (gr->anchor->op == OP_TARGET_COUNT) : 0;
        }
    }
    CHECK(side == 2 && side_ops == 3, "minimind: %d kernels on the side stream, not embedding_sort and target_count", side);
    const char *st = strstr(m.plan, " stream=");
    const char *st2 = st ? strstr(st + 1, " stream=") : NULL;
    CHECK(st && st2 && !strncmp(st, " stream=1 ", 10) && !strncmp(st2, " stream=1 ", 10) && !strstr(st2 + 1, " stream="),
          "minimind: stream=1 is not on two kernel lines only");

    expect_refused("not a plan", "hello\n", "bad/plan:1: not an mmc plan");
    expect_refused("future format", "mmc-plan 99\nend\n", "bad/plan:1: plan format 99, this mmc reads format 3");
    expect_refused("a plan from before the attribute and launch tables", "mmc-plan 1\nend\n", "recompile with mmc compile");
    char *cut = xstrndup(a.plan, strlen(a.plan) / 2);
    cut[strrchr(cut, '\n') - cut + 1] = 0;
    expect_refused_as_is("cut short", cut, "the plan is cut short");
    char *bad_op = xstrdup(a.plan);
    char *at = strstr(bad_op, " embedding ");
    memcpy(at, " embeddinx ", 11);
    expect_refused("unknown op", bad_op, "unknown op 'embeddinx'");
    char *bad_stream = xstrdup(a.plan);
    memcpy(strstr(bad_stream, " stream=1") + 8, "2", 1);
    char *want = xasprintf("bad/plan:%d: bad stream '2'", line_of(bad_stream, " stream=2"));
    expect_refused("stream 2", bad_stream, want);
    char *gemm_side = with_field(a.plan, "\ngemm ", " stream=1");
    want = xasprintf("bad/plan:%d: stream=1 on a gemm kernel", line_of(gemm_side, "\ngemm ") + 1);
    expect_refused("a gemm on the side stream", gemm_side, want);
    char *late_side = with_field(a.plan, "\nkernel k003_", " stream=1"); /* the first RMSNorm, after the embedding */
    expect_refused("a side kernel reading another's output", late_side, "which another kernel writes");
    /* op lines carry exactly the attributes their op uses (compiler/attrs.h), each readable */
    expect_refused("an attribute the op does not use", with_field(a.plan, " add in=", " heads=2"),
                   "field 'heads' is no attribute of add");
    char *no_eps = xstrdup(a.plan), *eps = strstr(strstr(no_eps, " rms_normalize in="), " eps=");
    memmove(eps, strchr(eps + 1, ' '), strlen(strchr(eps + 1, ' ')) + 1);
    expect_refused("a missing attribute", no_eps, "rms_normalize needs attribute eps");
    char *bad_heads = xstrdup(a.plan);
    memcpy(strstr(strstr(bad_heads, " rope in="), " heads=") + 7, "x", 1);
    expect_refused("a bad attribute value", bad_heads, "heads: 'x");
    expect_refused("an attribute twice", with_field(a.plan, " rope in=", " heads=2"), "attribute heads given twice");
    /* kernel kinds, phases, optimizer kernels and lr schedules are names from their tables
     * (program.h, lr_schedule.h): any other word is refused on its line, with the known ones */
    char *bad_opt = replaced(a.plan, " optimizer=adamw", " optimizer=adam");
    want = xasprintf("bad/plan:%d: unknown optimizer kernel 'adam' (known: grad_norm, adamw or step_finish)",
                     line_of(bad_opt, " optimizer=adam"));
    expect_refused("an unknown optimizer kernel", bad_opt, want);
    char *no_opt = replaced(a.plan, " optimizer=adamw", "");
    want = xasprintf("bad/plan:%d: missing field optimizer", line_of(no_opt, "_adamw kind=optimizer"));
    expect_refused("an optimizer kernel without its name", no_opt, want);
    expect_refused("an optimizer name on another kernel", with_field(a.plan, "\nkernel k002_", " optimizer=adamw"),
                   "optimizer=adamw on a");
    char *bad_phase = replaced(a.plan, " phase=update", " phase=updates");
    want = xasprintf("bad/plan:%d: unknown phase 'updates' (known: micro or update)", line_of(bad_phase, " phase=updates"));
    expect_refused("an unknown phase", bad_phase, want);
    expect_refused("an unknown kernel kind", replaced(a.plan, " kind=anchor", " kind=anchors"),
                   "unknown kernel kind 'anchors' (known: elementwise, anchor, gemm, cast_weights, optimizer or grad_accumulate)");
    expect_refused("an unknown lr schedule", replaced(a.plan, " schedule=minimind_cosine", " schedule=cosine"),
                   "unknown schedule 'cosine' (known: minimind_cosine or constant)");

    /* the plan's own bytes: one changed is refused before any line is believed, and so is a
     * plan without its content line or with text after `end` */
    char *edited = replaced(a.plan, " heads=4", " heads=2");
    want = xasprintf("bad/plan:%d: the plan's bytes hash to", line_of(a.plan, "\ncontent sha256=") + 1);
    expect_refused_as_is("an edited plan", edited, want);
    expect_refused_as_is("an edited plan", edited, "it was changed after mmc compile wrote it");
    char *unsealed = xstrdup(a.plan);
    strcpy(strstr(unsealed, "\ncontent sha256=") + 1, "end\n");
    expect_refused_as_is("no content line", unsealed, "no 'content sha256=' line before 'end'");
    expect_refused_as_is("text after end", xasprintf("%sloss %%1\n", a.plan), "text after 'end'");
    CHECK(!strcmp(plan_seal(a.plan), a.plan), "sealing a sealed plan changes it");

    /* kernels.cu is the plan's only if its SHA-256 is the one the plan's kernels line keeps */
    Plan *pk = plan_read(a.plan, "tiny/plan");
    pk->kernels = a.kernels;
    char *k = plan_kernels(pk);
    CHECK(!strcmp(k, a.kernels), "the plan's own kernels.cu comes back as it is");
    const char *foreign[] = {"", d.kernels};
    for (int i = 0; i < 2; i++) {
        set_die_hook(hook);
        last_error[0] = 0;
        pk->kernels = (char *)foreign[i];
        if (!setjmp(on_die)) {
            plan_kernels(pk);
            CHECK(0, "a %s kernels.cu is accepted", i ? "foreign" : "empty");
        } else {
            CHECK(strstr(last_error, "tiny/kernels.cu: not the kernels of tiny/plan") != NULL, "message '%s'", last_error);
        }
        set_die_hook(NULL);
    }

    /* every value a backend indexes with is checked where it is read: locations inside their
     * buffers and aligned, node ids, the op's shape rule (heads dividing the dims), launch
     * shapes within CUDA's limits, parameters inside the flat buffer, the grad-norm chunks,
     * training settings in their ranges, whole numbers */
    const int64_t *bytes = a.p->buffer_bytes;
    char *arena = xasprintf("buffer arena %lld\n", (long long)bytes[BUF_ARENA]);
    char *past = xasprintf(" at=arena+%lld ", (long long)bytes[BUF_ARENA]);
    expect_refused("an offset past its buffer", replaced(a.plan, " at=arena+0 ", past),
                   xasprintf("past the %lld bytes of buffer arena", (long long)bytes[BUF_ARENA]));
    expect_refused("a buffer too small", replaced(a.plan, arena, "buffer arena 16\n"), "past the 16 bytes of buffer arena");
    expect_refused("an offset not aligned", replaced(a.plan, " at=arena+0 ", " at=arena+1 "), "not a multiple of f16's 2 bytes");
    expect_refused("a negative offset", replaced(a.plan, " at=arena+0 ", " at=arena+-64 "), "offset: -64 is outside");
    expect_refused("heads=3", replaced_after(a.plan, " attention in=", " heads=4", " heads=3"),
                   "attention: heads must be a positive multiple of kv_heads");
    expect_refused("kv_heads=0", replaced_after(a.plan, " attention in=", " kv_heads=2", " kv_heads=0"),
                   "attention: heads must be a positive multiple of kv_heads");
    expect_refused("heads=0 on rope", replaced_after(a.plan, " rope in=", " heads=4", " heads=0"),
                   "rope: last dim of x is not a multiple of heads");
    expect_refused("leaf %-1", replaced(a.plan, "\nleaf %0 ", "\nleaf %-1 "), "node id: -1 is outside");
    expect_refused("an input used before it is defined", replaced_after(a.plan, "\nop ", " in=%", " in=%9999,%"),
                   "node %9999 used before it is defined");
    expect_refused("a node defined twice", replaced(a.plan, "\nleaf %1 ", "\nleaf %0 "), "node %0 defined twice");
    expect_refused("grid_y=0", replaced(a.plan, " grid_y=1 ", " grid_y=0 "), "grid_y: 0 is outside [1, 65535]");
    expect_refused("grid_y=70000", replaced(a.plan, " grid_y=1 ", " grid_y=70000 "), "grid_y: 70000 is outside [1, 65535]");
    expect_refused("block=2048", replaced(a.plan, " block=256 ", " block=2048 "), "block: 2048 is outside [1, 1024]");
    expect_refused("smem past 227 KiB", replaced(a.plan, " smem=0 ", " smem=300000 "), "smem: 300000 is outside");
    expect_refused("grid=1.5", replaced(a.plan, " grid=2 ", " grid=1.5 "), "grid: '1.5' is not a whole number");
    expect_refused("grid=2^63", replaced(a.plan, " grid=2 ", " grid=9223372036854775808 "), "is not a whole number");
    expect_refused("a dim of 0", replaced(a.plan, " shape=4,32 ", " shape=4,0 "), "a dim of the shape: 0 is outside");
    expect_refused("2^62 elements", replaced(a.plan, " shape=4,32 ", " shape=2147483648,2147483648 "), "more than 2^40 elements");
    expect_refused("a shape its inputs do not give", replaced_after(a.plan, "\nop ", " shape=4,32,64 ", " shape=4,32,65 "),
                   "but its inputs give [4,32,64]");
    char *one_input = xstrdup(a.plan), *add_in = strstr(one_input, " add in=");
    char *second = strchr(add_in, ',');
    memmove(second, strchr(second, ' '), strlen(strchr(second, ' ')) + 1);
    expect_refused("too few inputs", one_input, "add takes 2 inputs, got 1");
    expect_refused("a part out of range", replaced(a.plan, " index=1 ", " index=3 "), "extra outputs");
    int np = a.g->n_params;
    const Param *last = &a.g->params[np - 1];
    char *param_last = xasprintf(" param=%d ", np - 1), *param_past = xasprintf(" param=%d ", np);
    expect_refused("grad_accumulate param=-1", replaced(a.plan, param_last, " param=-1 "),
                   xasprintf("param=-1, but the plan has %d params", np));
    expect_refused("grad_accumulate param past the params", replaced(a.plan, param_last, param_past),
                   xasprintf("param=%d, but the plan has %d params", np, np));
    expect_refused("a param past its buffer",
                   replaced(a.plan, xasprintf(" offset=%lld ", (long long)last->offset), xasprintf(" offset=%lld ", (long long)last->offset + 1)),
                   xasprintf("is past the %lld of buffer params", (long long)bytes[BUF_PARAMS] / 4));
    expect_refused("a param on no param leaf", replaced(a.plan, xasprintf(" node=%%%d", last->node->id), " node=%0"), "which is no param leaf");
    expect_refused("chunks that the params do not make",
                   replaced(a.plan, xasprintf(" chunks=%d", a.p->n_chunks), xasprintf(" chunks=%d", a.p->n_chunks - 1)),
                   xasprintf("chunks=%d, but the params make %d chunks of", a.p->n_chunks - 1, a.p->n_chunks));
    expect_refused("buffer grads unlike params",
                   replaced(a.plan, xasprintf("buffer grads %lld\n", (long long)bytes[BUF_GRADS]),
                            xasprintf("buffer grads %lld\n", (long long)bytes[BUF_GRADS] + 4)),
                   "they have one layout");
    {
        long long want = (long long)MMC_STATE_BYTES((int64_t)a.g->n_params);
        expect_refused("a state buffer too small",
                       replaced(a.plan, xasprintf("buffer state %lld\n", want), xasprintf("buffer state %lld\n", want - 4)),
                       xasprintf("fewer than the %lld of the step state", want));
    }
    expect_refused("an unknown buffer", replaced(a.plan, "buffer arena ", "buffer arenas "), "unknown buffer 'arenas'");
    expect_refused("lr=nan", replaced_after(a.plan, "\ntrain ", " lr=0.0005 ", " lr=nan "), "lr: nan is outside");
    expect_refused("beta1=1", replaced_after(a.plan, "\ntrain ", " beta1=0.9 ", " beta1=1 "), "beta1: 1 is outside");
    expect_refused("accumulation=0", replaced_after(a.plan, "\ntrain ", " accumulation=1 ", " accumulation=0 "), "accumulation: 0 is outside");
    expect_refused("eps=nan", replaced_after(a.plan, " rms_normalize in=", " eps=", " eps=nan "), "eps: nan is not a finite number");
    expect_refused("a vocab the embedding does not have", replaced(a.plan, "model vocab=320 ", "model vocab=400 "),
                   "has 320 rows, the model's vocab is 400");
    expect_refused("a gemm of another shape", replaced(a.plan, " m=128 n=64 k=64 ", " m=128 n=64 k=65 "),
                   "but its op gives m=128 n=64 k=64");
    expect_refused("an anchor of another kernel",
                   replaced(a.plan, xasprintf(" anchor=%%%d\n", a.p->groups[0]->anchor->id),
                            xasprintf(" anchor=%%%d\n", a.p->groups[1]->anchor->id)),
                   "is no node of this kernel");
    expect_refused("a second hash line", replaced(a.plan, "\npolicy ", "\nhash 0\npolicy "), "a second 'hash' line");
    char *no_kernels = xstrdup(a.plan), *kline = strstr(no_kernels, "\nkernels sha256=");
    memmove(kline, strchr(kline + 1, '\n'), strlen(strchr(kline + 1, '\n')) + 1);
    expect_refused("no kernels line", no_kernels, "bad/plan:1: no 'kernels' line");
    expect_refused("a loss that is not a scalar",
                   replaced(a.plan, xasprintf("\nloss %%%d\n", a.g->loss->id), xasprintf("\nloss %%%d\n", a.g->loss->in[0]->id)),
                   "is not a stored scalar");
    { /* a weight-gradient GEMM that adds into the gradients (fp32: pass_dw_add) adds where its params' are */
        CompileResult f = compile("graphs/tiny.lua", "fp32", NULL);
        const char *at = strstr(f.plan, " linear_dw_add ");
        int k = -1;
        CHECK(at && sscanf(strstr(at, " param=") + 7, "%d", &k) == 1 && k > 0, "the fp32 plan has no linear_dw_add with a param");
        if (k > 0) {
            expect_refused("linear_dw_add of another param", replaced_after(f.plan, " linear_dw_add ", xasprintf(" param=%d ", k),
                                                                            xasprintf(" param=%d ", k - 1)),
                           xasprintf("linear_dw_add adds into the f32 gradients from param %d's", k - 1));
            expect_refused("linear_dw_add outside the gradients", replaced_after(f.plan, " linear_dw_add ", " at=grads+", " at=arena+"),
                           "linear_dw_add adds into the f32 gradients");
        }
    }
    return test_done("test_plan");
}
