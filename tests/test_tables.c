/* test_tables: the op table and the attribute table are complete and agree with themselves.
 * Every op's row has the name its enum was declared with, and every field its kind needs
 * (an elementwise op its math twice, an anchor its launch, codegen and reference functions
 * and templates that exist); every attribute prints and reads back exactly, and two nodes
 * that differ in any one attribute get different merge keys in pass_simplify. */
#include "attrs.h"
#include "embedded.h"
#include "ir.h"
#include "test_util.h"

static const char *const declared_names[] = {
#define X(e, name) name,
    MMC_OPS(X)
#undef X
};

static int template_exists(const char *name) {
    char *path = xasprintf("templates/%s", name);
    int found = 0;
    for (int i = 0; embedded_files[i].path; i++) found |= !strcmp(embedded_files[i].path, path);
    free(path);
    return found;
}

static void check_op(Op op) {
    const OpInfo *o = &op_info[op];
    const char *n = declared_names[op];
    CHECK(o->name && !strcmp(o->name, n), "op %d: table name %s, declared as %s", (int)op, o->name ? o->name : "(none)", n);
    CHECK(op_parse(n) == op, "%s: op_parse gives %d", n, (int)op_parse(n));
    CHECK(o->doc && *o->doc, "%s: no doc", n);
    /* -1: any number from two up (concat) */
    CHECK(o->n_in >= -1 && o->n_in <= IR_MAX_INPUTS, "%s: %d inputs", n, o->n_in);
    unsigned inputs = o->n_in < 0 ? (1u << IR_MAX_INPUTS) - 1 : (1u << o->n_in) - 1;
    CHECK(!(o->float_in & ~inputs) && !(o->prologue & ~inputs) && !(o->row_in & ~inputs), "%s: input bits past its %d inputs", n, o->n_in);
    CHECK(!(o->attrs >> ATTR_COUNT), "%s: attribute bits past the table", n);
    CHECK(!o->n_parts || o->part, "%s: %d parts and no part rule", n, o->n_parts);
    CHECK(o->kind == OK_ELEMENTWISE || !o->cuda_unit, "%s: cuda_unit on a %d kind", n, (int)o->kind);
    CHECK(o->kind == OK_ANCHOR || (!o->prologue && !o->epilogue && !o->row_sums && !o->side_stream),
          "%s: fusion hooks on a %d kind", n, (int)o->kind);
    int codegen = o->launch || o->gen || o->templates;
    switch (o->kind) {
    case OK_LEAF: CHECK(o->n_in == 0 && !o->shape && !o->eval && !o->ref && !codegen, "%s: a leaf with inputs or code", n); break;
    case OK_PART: CHECK(o->n_in == 1 && o->dtype && !o->ref && !codegen, "%s: a part needs one input and a dtype rule", n); break;
    case OK_ELEMENTWISE:
        CHECK(o->shape && o->eval && o->cuda && !o->ref && !codegen, "%s: elementwise needs shape, eval and cuda only", n);
        /* the epilogue form takes the unit's math and flag (templates/gemm_epilogue.cu) */
        CHECK(!o->cuda_unit || (strstr(o->cuda_unit, "math, untame") && strstr(o->cuda_unit, "$0")),
              "%s: cuda_unit %s does not take `math, untame` and its inputs", n, o->cuda_unit);
        break;
    case OK_GEMM: CHECK(o->shape && o->ref && !o->eval && !codegen, "%s: a GEMM needs shape and ref", n); break;
    case OK_VIEW: /* memory of other nodes: a shape and a dtype, no code of any kind */
        CHECK(o->shape && o->dtype && !o->eval && !o->cuda && !o->ref && !o->grad && !codegen, "%s: a view needs shape and dtype only", n);
        break;
    case OK_ANCHOR: {
        CHECK(o->shape && o->launch && o->gen && o->ref && o->templates && !o->eval, "%s: an anchor needs shape, launch, gen, ref, templates", n);
        if (!o->templates) break;
        char *list = xstrdup(o->templates), *save = NULL;
        int count = 0;
        for (char *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save), count++)
            CHECK(template_exists(t), "%s: template %s is not in templates/", n, t);
        CHECK(count > 0, "%s: empty template list", n);
        free(list);
        break;
    }
    }
}

/* values of each kind that differ in the last place, so a key that rounds merges them */
static void set_value(Attrs *a, AttrId id, int which) {
    char *err = NULL;
    switch (attr_info[id].kind) {
    case AK_DTYPE: err = attr_parse(a, id, which ? "f16" : "f32"); break;
    case AK_INT:
    case AK_I64: err = attr_parse(a, id, which ? "-100" : "7"); break;
    case AK_BOOL: err = attr_parse(a, id, which ? "1" : "0"); break;
    case AK_REAL: {
        char text[32];
        err = attr_parse(a, id, fmt_double(text, which ? nextafter(1e-5, 1.0) : 1e-5));
        break;
    }
    case AK_TEXT: err = attr_parse(a, id, which ? "normal(0,0.02)" : "normal(0,0.021)"); break;
    }
    CHECK(!err, "%s: %s", attr_info[id].key, err ? err : "");
    free(err);
}

static void check_attr(AttrId id) {
    const AttrInfo *info = &attr_info[id];
    CHECK(info->key && *info->key && info->doc && *info->doc, "attribute %d: no key or doc", (int)id);
    CHECK(attr_by_key(info->key) == id, "%s: found as %d", info->key, (int)attr_by_key(info->key));
    unsigned users = 0;
    for (int op = 0; op < OP_COUNT; op++) users |= (op_info[op].attrs >> id) & 1;
    CHECK(users, "%s: no op uses it", info->key);
    Attrs a = {0}, b = {0};
    set_value(&a, id, 0), set_value(&b, id, 1);
    StrBuf pa = {0}, pb = {0};
    attrs_print(&pa, &a, ~0u >> (32 - ATTR_COUNT)), attrs_print(&pb, &b, ~0u >> (32 - ATTR_COUNT));
    CHECK(strcmp(pa.s, pb.s) != 0, "%s: two values print the same (%s), so their nodes would merge", info->key, pa.s);
    /* what prints reads back to the same text: the plan round trip */
    StrBuf one = {0}, again = {0};
    attrs_print(&one, &b, 1u << id);
    const char *eq = strchr(one.s, '=');
    Attrs c = {0};
    char *err = attr_parse(&c, id, eq + 1);
    CHECK(!err, "%s: %s does not read back: %s", info->key, one.s, err ? err : "");
    attrs_print(&again, &c, 1u << id);
    CHECK(!strcmp(one.s, again.s), "%s: %s reads back as %s", info->key, one.s, again.s);
    free(err);
    sb_free(&pa), sb_free(&pb), sb_free(&one), sb_free(&again);
}

int main(void) {
    CHECK(sizeof declared_names / sizeof declared_names[0] == OP_COUNT, "MMC_OPS has %zu rows, OP_COUNT %d",
          sizeof declared_names / sizeof declared_names[0], OP_COUNT);
    for (int op = 0; op < OP_COUNT; op++) check_op((Op)op);
    CHECK(ATTR_COUNT <= 32, "%d attributes do not fit the ops' 32-bit masks", ATTR_COUNT);
    for (int id = 0; id < ATTR_COUNT; id++) check_attr((AttrId)id);
    /* a wrong kind in a plan is refused with the key's name */
    Attrs a = {0};
    char *err = attr_parse(&a, ATTR_HEADS, "8x");
    CHECK(err && strstr(err, "heads"), "heads=8x: %s", err ? err : "accepted");
    free(err);
    err = attr_parse(&a, ATTR_CAUSAL, "2");
    CHECK(err && strstr(err, "causal"), "causal=2: %s", err ? err : "accepted");
    free(err);
    return test_done("test_tables");
}
