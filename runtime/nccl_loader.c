/* nccl_loader: see nccl_loader.h. */
#include "nccl_loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static NcclApi api;
static int tried;
static char failure[1024]; /* why the first load failed, "" if it did not */

/* NCCL_VERSION(X,Y,Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 */
static void version_split(int code, int *major, int *minor, int *patch) {
    if (code >= 10000) *major = code / 10000, *minor = code % 10000 / 100;
    else *major = code / 1000, *minor = code % 1000 / 100;
    *patch = code % 100;
}

const char *nccl_version_text(const NcclApi *a) { return a ? a->version_text : "none"; }

/* dlsym into *slot, or a reason naming the function and the file */
static int resolve(void **slot, const char *name) {
    dlerror();
    *slot = dlsym(api.lib, name);
    if (*slot) return 0;
    const char *e = dlerror();
    snprintf(failure, sizeof failure, "%s has no %s (%s): an NCCL older than 2.10?", api.path, name, e ? e : "NULL");
    return -1;
}

static int load(void) {
    static const char *const names[] = {"libnccl.so.2", "libnccl.so"};
    char first_error[512] = "";
    for (size_t i = 0; i < sizeof names / sizeof *names && !api.lib; i++) {
        api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!api.lib && !first_error[0]) {
            const char *e = dlerror();
            snprintf(first_error, sizeof first_error, "%s", e ? e : names[i]);
        }
    }
    if (!api.lib) {
        snprintf(failure, sizeof failure,
                 "NCCL not found (%s): install it or add its folder to LD_LIBRARY_PATH; one GPU needs none", first_error);
        return -1;
    }
    struct link_map *lm = NULL;
    snprintf(api.path, sizeof api.path, "%s",
             dlinfo(api.lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] ? lm->l_name : "libnccl");
    /* function pointers through void * slots: POSIX makes dlsym's result callable */
    if (resolve((void **)&api.GetVersion, "ncclGetVersion") || resolve((void **)&api.GetUniqueId, "ncclGetUniqueId") ||
        resolve((void **)&api.CommInitRank, "ncclCommInitRank") || resolve((void **)&api.CommDestroy, "ncclCommDestroy") ||
        resolve((void **)&api.CommAbort, "ncclCommAbort") ||
        resolve((void **)&api.CommGetAsyncError, "ncclCommGetAsyncError") ||
        resolve((void **)&api.GetErrorString, "ncclGetErrorString") || resolve((void **)&api.AllReduce, "ncclAllReduce") ||
        resolve((void **)&api.ReduceScatter, "ncclReduceScatter") || resolve((void **)&api.AllGather, "ncclAllGather") ||
        resolve((void **)&api.GroupStart, "ncclGroupStart") || resolve((void **)&api.GroupEnd, "ncclGroupEnd"))
        return -1;
    NcclResult r = api.GetVersion(&api.version);
    if (r != NCCL_RESULT_SUCCESS) {
        snprintf(failure, sizeof failure, "%s: ncclGetVersion failed: %s", api.path, api.GetErrorString(r));
        return -1;
    }
    int major, minor, patch;
    version_split(api.version, &major, &minor, &patch);
    snprintf(api.version_text, sizeof api.version_text, "%d.%d.%d", major, minor, patch);
    if (major != 2) {
        snprintf(failure, sizeof failure, "%s is NCCL %s (version code %d); mmc knows the ABI of NCCL 2.x", api.path,
                 api.version_text, api.version);
        return -1;
    }
    return 0;
}

const NcclApi *nccl_load(char **why) {
    if (!tried) {
        tried = 1;
        if (load()) {
            if (api.lib) dlclose(api.lib);
            memset(&api, 0, sizeof api);
            if (!failure[0]) snprintf(failure, sizeof failure, "NCCL could not be loaded");
        }
    }
    if (failure[0]) {
        if (why) *why = xstrdup(failure);
        return NULL;
    }
    return &api;
}
