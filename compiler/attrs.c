/* attrs: the attribute table (attrs.h) and the printing and parsing it drives. */
#include "attrs.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const AttrInfo attr_info[ATTR_COUNT] = {
#define X(e, field, ctype, kind, key, source, doc) [ATTR_##e] = {key, kind, source, offsetof(Attrs, field), doc},
    MMC_ATTRS(X)
#undef X
};

#define FIELD(a, id, type) (*(type *)((char *)(a) + attr_info[id].offset))

void attrs_print(StrBuf *o, const Attrs *a, unsigned mask) {
    char d[32];
    for (int id = 0; id < ATTR_COUNT; id++) {
        if (!(mask & (1u << id))) continue;
        const char *k = attr_info[id].key;
        switch (attr_info[id].kind) {
        case AK_DTYPE: sb_printf(o, " %s=%s", k, dtype_name(FIELD(a, id, const DType))); break;
        case AK_INT:
        case AK_BOOL: sb_printf(o, " %s=%d", k, FIELD(a, id, const int)); break;
        case AK_I64: sb_printf(o, " %s=%lld", k, (long long)FIELD(a, id, const int64_t)); break;
        case AK_REAL: sb_printf(o, " %s=%s", k, fmt_double(d, FIELD(a, id, const double))); break;
        case AK_TEXT: sb_printf(o, " %s=%s", k, FIELD(a, id, const char *const) ? FIELD(a, id, const char *const) : "-"); break;
        }
    }
}

char *attr_parse(Attrs *a, AttrId id, const char *text) {
    const AttrInfo *info = &attr_info[id];
    char *end;
    errno = 0;
    switch (info->kind) {
    case AK_DTYPE: {
        DType t = dtype_parse(text);
        if (t == DT_NONE) return xasprintf("%s: unknown dtype '%s'", info->key, text);
        FIELD(a, id, DType) = t;
        return NULL;
    }
    case AK_INT:
    case AK_BOOL:
    case AK_I64: {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end || errno) return xasprintf("%s: '%s' is not an integer", info->key, text);
        if (info->kind == AK_BOOL && v != 0 && v != 1) return xasprintf("%s: '%s' is not 0 or 1", info->key, text);
        if (info->kind != AK_I64 && (v < -2147483647LL - 1 || v > 2147483647LL))
            return xasprintf("%s: %s is out of range", info->key, text);
        if (info->kind == AK_I64) FIELD(a, id, int64_t) = (int64_t)v;
        else FIELD(a, id, int) = (int)v;
        return NULL;
    }
    case AK_REAL: {
        double v = strtod(text, &end);
        if (end == text || *end) return xasprintf("%s: '%s' is not a number", info->key, text);
        FIELD(a, id, double) = v;
        return NULL;
    }
    case AK_TEXT:
        if (!*text) return xasprintf("%s: empty", info->key);
        FIELD(a, id, const char *) = xstrdup(text);
        return NULL;
    }
    return xasprintf("%s: unknown attribute kind", info->key);
}

AttrId attr_by_key(const char *key) {
    for (int id = 0; id < ATTR_COUNT; id++)
        if (!strcmp(attr_info[id].key, key)) return (AttrId)id;
    return ATTR_COUNT;
}
