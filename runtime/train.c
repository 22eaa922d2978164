/* train: see train.h. */
#include "train.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "data.h"
#include "defaults.h"
#include "find_overflow.h"
#include "init.h"
#include "monitor.h"
#include "plan_remake.h"
#include "plan_set.h"
#include "train_dist.h"
#include "util.h"

const Node *train_role(const Plan *pl, Role r) {
    if (pl->g->role[r]) return pl->g->role[r];
    die("%s: no input has the role %s: give one in %s as input(name, shape, \"%s\", { role = \"%s\" }) and compile "
        "again", pl->path, role_names[r], pl->g->source, dtype_name(role_dtypes[r]), role_names[r]);
}

Backend *backend_open(Plan *pl, const char *name, const char *cmd) {
    if (!strcmp(name, "ref")) return ref_backend_create(pl);
    if (strcmp(name, "cuda") && strcmp(name, "auto")) die("%s: unknown backend '%s' (ref, cuda, auto)", cmd, name);
    char *why = NULL;
    Backend *b = cuda_backend_create(pl, &why);
    if (!b && !strcmp(name, "auto")) { /* the GPU where there is one, else the CPU */
        free(why);
        return ref_backend_create(pl);
    }
    if (!b) die("%s: --backend cuda: %s; use --backend ref to run on the CPU", cmd, why);
    return b;
}

uint32_t train_vocab(const Plan *pl) {
    if (model_has(&pl->g->model, MF_VOCAB)) return (uint32_t)pl->g->model.value[MF_VOCAB];
    die("%s: the graph declares no vocabulary: give it in %s as model { vocab = N } and compile again", pl->path,
        pl->g->source);
}

double read_loss(Backend *b) {
    const Node *l = b->pl->g->loss;
    unsigned char bytes[8];
    b->read(b, l->buffer, l->offset, bytes, (int64_t)dtype_size(l->dtype));
    return dtype_load(l->dtype, bytes, 0);
}

/* the target id the loss leaves out: the ignore of the cross_entropy against the targets
 * (torch's -100 unless the graph names one), or BATCHER_PAD_ID when no cross_entropy reads them */
static int64_t loss_ignore_id(const Plan *pl) {
    const Node *targets = pl->g->role[ROLE_TARGETS];
    for (int i = 0; i < pl->g->n_nodes; i++) {
        const Node *n = pl->g->nodes[i];
        if (n->op == OP_CROSS_ENTROPY && n->in[1] == targets) return n->a.ignore_index;
    }
    return BATCHER_PAD_ID;
}

Batcher *train_batches(const Plan *pl, const char *path, uint64_t shuffle) {
    const Node *ids_leaf = train_role(pl, ROLE_TOKENS);
    int64_t ignore = loss_ignore_id(pl);
    Batcher *data = batcher_open(path, ids_leaf->shape.dim[0], ids_leaf->shape.dim[1], train_vocab(pl), shuffle, ignore);
    if (data->file->mask && ignore == BATCHER_PAD_ID) {
        batcher_close(data);
        die("%s: has a loss mask, but no cross_entropy of %s reads the targets, so nothing would leave the masked "
            "targets out",
            path, pl->g->source);
    }
    /* the loss leaves out the model's pad id: a file padded with another id would have its
     * padding learned, and its own pad id, a real token to the model, left out nowhere */
    const ModelInfo *m = &pl->g->model;
    if (model_has(m, MF_PAD_ID) && data->file->pad_id != (uint32_t)m->value[MF_PAD_ID]) {
        uint32_t file_pad = data->file->pad_id;
        batcher_close(data);
        die("%s: padded with id %u, but the model's pad id is %lld (model{ pad_id } of %s): make the data with the "
            "model's pad token, or declare pad_id = %u",
            path, file_pad, (long long)m->value[MF_PAD_ID], pl->g->source, file_pad);
    }
    return data;
}

void train_load_batch(Backend *b, const char *path) {
    const Node *ids_leaf = train_role(b->pl, ROLE_TOKENS), *labels_leaf = train_role(b->pl, ROLE_TARGETS);
    Batcher *data = train_batches(b->pl, path, 0);
    int64_t n = data->batch * data->seq;
    int32_t *ids = xmalloc((size_t)n * sizeof *ids), *labels = xmalloc((size_t)n * sizeof *labels);
    batcher_next(data, ids, labels);
    b->write(b, BUF_IO, ids_leaf->offset, ids, n * (int64_t)sizeof *ids);
    b->write(b, BUF_IO, labels_leaf->offset, labels, n * (int64_t)sizeof *labels);
    free(ids), free(labels);
    batcher_close(data);
}

int run_folder_lock(const char *dir, const char *cmd) {
    make_dirs(dir);
    char *path = path_join(dir, ".lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) die("%s: cannot lock: %s", path, strerror(errno));
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        die("%s: %s is in use by another mmc (pid %s): one process writes a run folder at a time; wait for it to end, "
            "or give another folder",
            cmd, dir, pid[0] ? pid : "?");
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) die("%s: cannot write: %s", path, strerror(errno));
    free(path);
    return fd;
}

/* A whole metrics line of update <= upto: the lines a resumed run keeps. Lines past its
 * checkpoint came from updates that the resume does again; a line without its newline was
 * being written when the run was killed. */
static int metrics_line_kept(const char *line, size_t len, int64_t upto) {
    char *text = xstrndup(line, len);
    json_t *j = json_loads(text, 0, NULL), *u = j ? json_object_get(j, "update") : NULL;
    int keep = json_is_integer(u) && json_integer_value(u) <= upto;
    json_decref(j);
    free(text);
    return keep;
}

/* metrics.jsonl cut back to the lines of updates up to `upto`, opened to append */
static int open_metrics(const char *path, int64_t upto, int64_t *bytes) {
    StrBuf keep = {0};
    size_t len = 0;
    char *old = upto > 0 ? try_read_file(path, &len) : NULL;
    int64_t lines = 0;
    for (char *line = old, *nl; line && (nl = memchr(line, '\n', len - (size_t)(line - old))); line = nl + 1)
        if (metrics_line_kept(line, (size_t)(nl - line), upto)) sb_appendn(&keep, line, (size_t)(nl + 1 - line)), lines++;
    if (lines < upto)
        fprintf(stderr, "train: %s has the lines of %lld of the %lld updates done: the run goes on without the others\n",
                path, (long long)lines, (long long)upto);
    write_file_atomic(path, keep.s ? keep.s : "", keep.len);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    *bytes = (int64_t)keep.len;
    free(old), sb_free(&keep);
    return fd;
}

/* JSON has no inf or nan: those become null */
static void json_number(char *buf, size_t n, double v) {
    if (isfinite(v)) snprintf(buf, n, "%.9g", v);
    else snprintf(buf, n, "null");
}

static void duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* What the host reads back of one update, asynchronously: the loss of each micro-step and
 * the step state after the update. The loop reads slot u only LAG updates later, so the GPU
 * never waits for the host. */
enum { LAG = 2, SLOTS = LAG + 1 };

typedef struct Slot {
    int32_t **ids, **labels; /* [accumulation] pinned batches */
    unsigned char *losses;   /* [accumulation] losses in the loss dtype */
    MmcStepState *state;     /* and after it the per-parameter zero counts (step_state.h) */
    int ticket;
    const char *entered;     /* the policy whose plan this update was the first of, or NULL */
} Slot;

typedef struct Report {
    int metrics;           /* metrics.jsonl open to append, or -1 */
    char *metrics_path;
    int64_t metrics_bytes; /* its length after the last whole line */
    int64_t saved;         /* the update of the last checkpoint, for a message; -1 before the first */
    double t0, t_last, loss_sum;
    double paused; /* seconds spent on --val since the last log line, not training */
    double paused_total; /* and over the whole run */
    int64_t last_logged, steps, epochs, tokens_per_update;
    int interval, quiet;
    double flops_per_token, peak_flops; /* MFU where the device's peak is known */
    double last_val;                    /* the latest --val loss, NAN before the first */
    int floor_warned;                   /* the alarm of the loss scale at its floor was given */
    Monitor monitor;                    /* skip rate, underflow and loss spikes (monitor.h) */
} Report;

/* training FLOPs per token: 6 per parameter (forward and backward), and for each attention
 * 6 T d over its causal half of the T x T scores (12 T d without the mask) */
static double flops_per_token(const Plan *pl, int64_t *params) {
    double n = 0, attn = 0;
    for (int i = 0; i < pl->g->n_params; i++) n += (double)shape_numel(&pl->g->params[i].node->shape);
    for (int i = 0; i < pl->g->n_nodes; i++) {
        const Node *a = pl->g->nodes[i];
        if (a->op != OP_ATTENTION) continue;
        attn += 6.0 * (double)a->shape.dim[1] * (double)a->shape.dim[2] * (a->a.causal ? 1 : 2);
    }
    *params = (int64_t)n;
    return 6 * n + attn;
}

/* an evaluation on --val after an update, reported with that update */
typedef struct ValResult {
    int64_t update; /* 0: none */
    double loss, targets, seconds;
    int64_t batches;
} ValResult;

/* the run stops on a metrics file it cannot write: its checkpoints would go on past lines
 * that are not there */
static MMC_NORETURN void metrics_failed(const Report *r, const char *what, int e) {
    if (r->saved < 0)
        die("train: %s: %s: %s; the run stops here, before its first checkpoint (make room, then start it again with "
            "--force)",
            r->metrics_path, what, strerror(e));
    die("train: %s: %s: %s; the run stops here, its last checkpoint is of update %lld (make room, then continue with "
        "--resume)",
        r->metrics_path, what, strerror(e), (long long)r->saved);
}

/* One write() of the whole line, so that a kill leaves whole lines. Only a full disk makes it
 * short, and then the rest gets the error, and the part written is cut off again. */
static void metrics_write(Report *r, const char *line, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = write(r->metrics, line + done, n - done);
        if (w > 0) done += (size_t)w;
        else if (w < 0 && errno == EINTR) continue;
        else {
            int e = w < 0 ? errno : ENOSPC;
            int cut = ftruncate(r->metrics, (off_t)r->metrics_bytes) == 0;
            metrics_failed(r, cut ? "cannot write" : "cannot write (a part of a line is left at its end)", e);
        }
    }
    r->metrics_bytes += (int64_t)n;
}

/* the metrics so far made durable before the checkpoint that they lead up to */
static void metrics_sync(const Report *r) {
    if (r->metrics >= 0 && fsync(r->metrics) != 0) metrics_failed(r, "cannot flush", errno);
}

static void report(Report *r, const Backend *b, const Slot *slot, int64_t u, int64_t epoch, const ValResult *val) {
    const TrainConfig *t = &b->pl->g->train;
    const Node *l = b->pl->g->loss;
    const MmcStepState *st = slot->state;
    double loss = 0;
    for (int a = 0; a < t->accumulation; a++) loss += dtype_load(l->dtype, slot->losses, (size_t)a);
    loss /= t->accumulation;
    r->loss_sum += loss;
    double now = now_seconds();
    int has_val = val->update == u + 1;
    /* the alarm: an update overflowed with the scale at its floor (loss_scale min), so the
     * scale cannot go lower and every such update is lost */
    int at_floor = t->loss_scaling && !t->scale_fixed && t->scale_min > 0 && st->overflow_streak > 0 &&
                   st->scale <= (float)t->scale_min;
    if (at_floor && !r->floor_warned)
        fprintf(stderr, "mmc train: update %lld overflowed with the loss scale at its floor (loss_scale min = %g); the updates "
                        "that overflow there are skipped: a bf16 or fp32 policy, or a lower learning rate, may be needed\n",
                (long long)(u + 1), t->scale_min);
    r->floor_warned = st->scale <= (float)t->scale_min && (r->floor_warned || at_floor);
    StrBuf line = {0};
    {
        char loss_s[32], norm_s[32], val_s[96] = "";
        /* the loss to the last bit: a resumed run rebuilds its loss-spike window from these */
        if (isfinite(loss)) snprintf(loss_s, sizeof loss_s, "%.17g", loss);
        else snprintf(loss_s, sizeof loss_s, "null");
        json_number(norm_s, sizeof norm_s, st->grad_norm);
        if (has_val) {
            char vl[32], vp[32];
            json_number(vl, sizeof vl, val->loss);
            json_number(vp, sizeof vp, exp(val->loss));
            snprintf(val_s, sizeof val_s, ", \"val_loss\": %s, \"val_ppl\": %s", vl, vp);
        }
        sb_printf(&line,
                  "{\"update\": %lld, \"epoch\": %lld, \"loss\": %s, \"lr\": %.9g, \"scale\": %.9g, \"grad_norm\": %s, "
                  "\"skipped\": %d, \"growth_tracker\": %d, \"overflow_streak\": %d, \"seconds\": %.6f%s%s",
                  (long long)(u + 1), (long long)epoch, loss_s, st->lr, (double)st->scale, norm_s, st->skipped,
                  st->growth_tracker, st->overflow_streak, now - r->t0, val_s, at_floor ? ", \"scale_floor\": true" : "");
    }
    if (slot->entered) {
        json_t *name = json_string(slot->entered);
        char *quoted = json_dumps(name, JSON_ENCODE_ANY);
        sb_printf(&line, ", \"precision\": %s", quoted);
        free(quoted);
        json_decref(name);
    }
    MonitorReport mon = monitor_update(&r->monitor, u, r->steps, loss, st,
                                       (const unsigned int *)((const unsigned char *)st + MMC_STATE_ZEROS),
                                       t->loss_scaling, &line);
    sb_append(&line, "}\n");
    if (r->metrics >= 0) {
        metrics_write(r, line.s, line.len);
    }
    sb_free(&line);
    if (has_val) r->last_val = val->loss;
    if (has_val && !r->quiet)
        printf("Eval(%lld/%lld) val_loss %.4f val_ppl %.3f | %lld batches, %.0f targets, %.2f s\n", (long long)(u + 1),
               (long long)r->steps, val->loss, exp(val->loss), (long long)val->batches, val->targets, val->seconds);
    if (r->quiet || ((u + 1) % r->interval != 0 && u + 1 != r->steps)) return;
    int64_t n = u + 1 - r->last_logged;
    double dt = now - r->t_last - r->paused, per_step = dt / (double)n;
    char eta[32];
    duration(eta, sizeof eta, per_step * (double)(r->steps - u - 1));
    double tok_s = (double)(n * r->tokens_per_update) / dt;
    char val_s[32] = "", mfu_s[32] = "", skip_s[64] = "";
    if (mon.window_ended)
        snprintf(skip_s, sizeof skip_s, " (%d of the last %lld, %.1f%%)", mon.window_skipped,
                 (long long)mon.window_updates,
                 mon.window_updates ? 100.0 * mon.window_skipped / (double)mon.window_updates : 0.0);
    if (!isnan(r->last_val)) snprintf(val_s, sizeof val_s, " val %.4f", r->last_val);
    if (r->peak_flops > 0) snprintf(mfu_s, sizeof mfu_s, " MFU %.1f%%", 100 * tok_s * r->flops_per_token / r->peak_flops);
    printf("Epoch[%lld/%lld](%lld/%lld) loss %.4f%s lr %.8f | %.1fK tok/s %.1f ms/step%s | scale %g grad_norm %.4f "
           "skipped %d%s | ETA %s\n",
           (long long)(epoch > r->epochs ? r->epochs : epoch), (long long)r->epochs, (long long)(u + 1), (long long)r->steps,
           r->loss_sum / (double)n, val_s, st->lr, tok_s / 1e3, 1e3 * per_step, mfu_s, (double)st->scale,
           (double)st->grad_norm, st->skipped, skip_s, eta);
    fflush(stdout);
    r->loss_sum = 0;
    r->paused = 0;
    r->last_logged = u + 1;
    r->t_last = now;
}

/* SIGINT or SIGTERM during training: the update in flight finishes, a checkpoint is written
 * (with --out) and the run exits with 128 + the signal; a second one stops at once. */
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static void catch_signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = (int)SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* what --shuffle a run used, in the words of the command line */
static char *shuffle_words(uint64_t shuffle) {
    return shuffle ? xasprintf("--shuffle %llu", (unsigned long long)(shuffle - 1)) : xstrdup("the file's order (no --shuffle)");
}

/* A run goes on with the data it started on, in the same order: the token file's hash and
 * the shuffle seed are in its resume file. */
static void check_resume_data(const TrainOptions *o, const RunPosition *pos, const char *sha) {
    if (pos->data_sha256[0] && strcmp(pos->data_sha256, sha))
        die("train: %s is not the data %s was trained on (%s, sha256 %.12s...; this file %.12s...): resume with that "
            "token file",
            o->data, o->resume, pos->data_file, pos->data_sha256, sha);
    if (o->shuffle && o->shuffle != pos->shuffle)
        die("train: %s, but %s was trained with %s: leave --shuffle out to keep the run's order", shuffle_words(o->shuffle),
            o->resume, shuffle_words(pos->shuffle));
}

/* The run folder keeps the tokenizer.json its data was made with, as the token file's header
 * names it by hash: --tokenizer, or a tokenizer.json beside the data, or the built-in one. */
static void keep_tokenizer(const TrainOptions *o, const TokenFile *f, const char *out) {
    if (!f->tokenizer_sha256[0]) return; /* a file that does not say (tests/make_byte_tokens.py) */
    char *dir = path_dirname(o->data), *beside = path_join(dir, "tokenizer.json");
    const char *candidates[] = {o->tokenizer, beside, "default"};
    for (int i = 0; i < 3; i++) {
        if (!candidates[i] || (i == 1 && access(beside, R_OK))) continue;
        char sha[65];
        tokenizer_json_sha256(candidates[i], sha);
        if (strcmp(sha, f->tokenizer_sha256)) {
            if (i == 0)
                die("train: --tokenizer %s is not the tokenizer %s was made with (sha256 %.12s..., the file says %.12s...)",
                    o->tokenizer, o->data, sha, f->tokenizer_sha256);
            continue;
        }
        size_t len = 0;
        char *text = tokenizer_json_text(candidates[i], &len), *path = path_join(out, "tokenizer.json");
        write_file_atomic(path, text, len);
        free(text), free(path), free(dir), free(beside);
        return;
    }
    fprintf(stderr, "train: %s was made with a tokenizer (sha256 %.12s...) that is neither beside it nor the built-in "
                    "one: give it with --tokenizer FILE to keep it in %s\n",
            o->data, f->tokenizer_sha256, out);
    free(dir), free(beside);
}

/* the file of a run that `dir` holds (a checkpoint or the metrics), or NULL */
static const char *run_file_in(const char *dir) {
    static const char *const files[] = {"model.safetensors", "resume.safetensors", "metrics.jsonl", "latest", NULL};
    for (int i = 0; files[i]; i++) {
        char *p = xasprintf("%s/%s", dir, files[i]);
        int there = access(p, F_OK) == 0;
        free(p);
        if (there) return files[i];
    }
    return NULL;
}

static int same_dir(const char *a, const char *b) {
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra), free(rb);
    return same;
}

/* --out onto a folder that holds a run would overwrite its checkpoints and metrics: only a
 * resume of that same run continues there, or --force replaces it */
static void check_out(const TrainOptions *o) {
    const char *f = o->out ? run_file_in(o->out) : NULL;
    if (!f || o->force || (o->resume && same_dir(o->resume, o->out))) return;
    die("train: --out %s already holds a run (%s); continue it with --resume %s, or replace it with --force", o->out, f,
        o->out);
}

/* --val's backend: the training plan's graph forward-only, in a temp folder (*dir), on buffers
 * of its own that take the weights before each evaluation */
static Backend *open_eval(const Plan *pl, const char *backend, char **dir, Plan **epl) {
    *dir = plan_remake(pl, NULL, 0, NULL, 0, 1);
    *epl = plan_load(*dir);
    Backend *eb = backend_open(*epl, backend, "train --val");
    init_consts(eb);
    MmcStepState est = init_state(*epl, 1);
    eb->write(eb, BUF_STATE, 0, &est, sizeof est);
    return eb;
}

/* The plan that runs update u (0-based): its phase's, or the fallback's from the update it
 * falls back on (1-based fallback_at; 0: none). */
static Plan *plan_for(const PlanSet *set, int64_t fallback_at, int64_t u) {
    if (fallback_at > 0 && u + 1 >= fallback_at) return set->fallback;
    return set->phase[planset_phase_of(set, u)];
}

/* Update u is the first of a plan the run enters: a phase's first, or the fallback's. */
static int entering(const PlanSet *set, int64_t fallback_at, int64_t u) {
    if (fallback_at > 0 && u + 1 >= fallback_at) return u + 1 == fallback_at;
    int k = planset_phase_of(set, u);
    return k > 0 && set->first[k] == u;
}

/* The step state as a plan starts it: its loss scaler from its init (a phase without one, as
 * fp32, runs at scale 1), the counts and the schedule as they are. Applied at the first update
 * of the plan, whether the run got there or was resumed there, so both go on alike. */
static void enter_plan(Backend *b) {
    MmcStepState st, fresh = init_state(b->pl, 1);
    b->read(b, BUF_STATE, 0, &st, sizeof st);
    st.scale = fresh.scale;
    st.loss_seed = fresh.loss_seed;
    st.growth_tracker = 0;
    st.overflow_streak = 0;
    b->write(b, BUF_STATE, 0, &st, sizeof st);
}

/* how the log names a plan of the set */
static const char *plan_words(const PlanSet *set, const Plan *p) {
    static char buf[256];
    if (p == set->fallback) snprintf(buf, sizeof buf, "the fallback, %s (%s)", set->fallback_what, p->path);
    else
        for (int k = 0; k < set->n_phases; k++)
            if (set->phase[k] == p) snprintf(buf, sizeof buf, "phase %d of %d, %s (%s)", k + 1, set->n_phases, p->g->policy.name, p->path);
    return buf;
}

/* the update a resumed run falls back on, from the metrics of the run up to its checkpoint
 * (0: it has not fallen back) */
static int64_t metrics_fallback_at(const char *run_dir, int64_t upto) {
    char *path = path_join(run_dir, "metrics.jsonl");
    size_t len = 0;
    char *text = try_read_file(path, &len);
    int64_t at = 0;
    for (char *line = text, *nl; line && (nl = memchr(line, '\n', len - (size_t)(line - text))); line = nl + 1) {
        *nl = 0;
        json_t *j = json_loads(line, 0, NULL), *u = j ? json_object_get(j, "update") : NULL;
        json_t *f = j ? json_object_get(j, "fallback_at") : NULL;
        if (json_is_integer(u) && json_integer_value(u) <= upto && json_is_integer(f)) at = json_integer_value(f);
        json_decref(j);
    }
    free(text), free(path);
    return at;
}

int train_run(const TrainOptions *opts) {
    /* one process of a data-parallel job, or the whole run; rank 0 alone writes and logs */
    TrainDist *dist = train_dist_start(opts->backend, &interrupted);
    int rank = dist ? train_dist_env(dist)->rank : 0, world = dist ? train_dist_env(dist)->world : 1;
    if (world > 1 && opts->find_overflow) /* its replay is one process's micro-steps, on its own slice of the batch */
        die("train: rank %d of %d: --find-overflow replays the micro-steps of one process: run it with a world of 1", rank, world);
    TrainOptions mine = *opts;
    if (rank) mine.out = NULL, mine.val = NULL, mine.quiet = 1, mine.result = NULL;
    const TrainOptions *o = &mine;
    Plan *pl = plan_load(o->plan_dir);
    int updates = 0;
    for (int i = 0; i < pl->p->n_groups; i++) updates |= pl->p->groups[i]->phase == PHASE_UPDATE;
    if (!updates) die("train: %s has no backward pass (compiled with --forward): compile it without to train", o->plan_dir);
    PlanSet *set = planset_load(pl);
    const TrainConfig *t = &pl->g->train;
    const Node *ids_leaf = train_role(pl, ROLE_TOKENS), *labels_leaf = train_role(pl, ROLE_TARGETS);
    int64_t B = ids_leaf->shape.dim[0], T = ids_leaf->shape.dim[1];
    if (o->batch && o->batch != B)
        die("train: --batch %lld but %s was compiled for batch %lld: recompile with -D batch=%lld", (long long)o->batch,
            pl->path, (long long)B, (long long)o->batch);
    Batcher *data = train_batches(pl, o->data, o->shuffle);
    batcher_set_rank(data, rank, world); /* B is each rank's; an update reads B x world rows */
    int64_t steps = o->steps > 0 ? o->steps : (data->rows / (B * t->accumulation * world)) * (t->epochs > 0 ? t->epochs : 1);
    if (steps < 1) steps = 1;
    RunPosition pos = {0, o->seed, o->shuffle, "", ""};
    char sha[65] = "";
    if (o->out || o->resume) tokens_sha256(data->file, sha);
    /* the folder is this run's from here on: what an earlier run left half-written goes, and
     * the checkpoint read below cannot change under it */
    const char *out = o->out ? o->out : rank ? NULL : o->resume;
    int lock = out ? run_folder_lock(out, "train") : -1;
    int same_run = o->resume && out && same_dir(o->resume, out);
    if (out) {
        check_out(o);
        checkpoint_tidy(out, o->force && !same_run);
    }
    MmcStepState st;
    int64_t start = 0, model_update = -1, fallback_at = 0;
    char *ckpt = o->resume ? checkpoint_committed(o->resume, pl->g->hash, &model_update) : NULL;
    if (ckpt && set->fallback) fallback_at = metrics_fallback_at(o->resume, model_update);
    /* the plan of the first update to run: of its phase, or the fallback once the run fell back */
    Backend *b = backend_open(plan_for(set, fallback_at, model_update > 0 ? model_update : 0), o->backend, "train");
    init_consts(b);
    if (dist) train_dist_attach(dist, b);
    if (set->fallback && !o->no_fallback && !strcmp(b->name, "cuda")) { /* refused before the run, not when it fires */
        char *refusal = backend_bf16_refusal(set->fallback, cuda_device_sm(), b->device, "the fallback plan");
        if (refusal) die("train: %s (or train with --no-fallback)", refusal);
    }
    if (o->resume) {
        char *set_dir = ckpt;
        pos = checkpoint_resume(b, set_dir, plan_for(set, fallback_at, model_update > 0 ? model_update - 1 : 0));
        check_resume_data(o, &pos, sha);
        b->read(b, BUF_STATE, 0, &st, sizeof st);
        if (model_update >= 0 && model_update != st.update)
            die("train: %s/model.safetensors is of update %lld, but the step state beside it of update %d: they are not "
                "one checkpoint",
                set_dir, (long long)model_update, st.update);
        free(set_dir);
        start = st.update;
        int64_t planned = (int64_t)(st.total_micro / t->accumulation + 0.5);
        if (o->steps > 0 && o->steps != planned) {
            /* a new length for the run: the schedule is the one of a run planned for that many
             * updates from the start, so the learning rate goes on from where that one is now */
            if (o->steps < start)
                die("train: %s has done %lld updates already; --steps %lld would end it before that", o->resume,
                    (long long)start, (long long)o->steps);
            st.total_micro = (double)o->steps * t->accumulation;
            b->write(b, BUF_STATE, 0, &st, sizeof st);
            if (!o->quiet)
                printf("%s: %lld updates instead of %lld; the schedule is now that of a %lld-update run\n", o->resume,
                       (long long)o->steps, (long long)planned, (long long)o->steps);
            planned = o->steps;
        }
        steps = planned;
        data->shuffle = pos.shuffle;
        data->position = pos.rows;
        if (!o->quiet) printf("resuming %s at update %lld of %lld\n", o->resume, (long long)start, (long long)steps);
    } else {
        init_params(b, o->seed);
        if (o->init) checkpoint_load_weights(b, o->init);
        st = init_state(b->pl, steps);
        b->write(b, BUF_STATE, 0, &st, sizeof st);
    }
    if (!pos.data_sha256[0] && sha[0]) { /* a new run, or one from before runs recorded their data */
        const char *slash = strrchr(o->data, '/');
        snprintf(pos.data_sha256, sizeof pos.data_sha256, "%s", sha);
        snprintf(pos.data_file, sizeof pos.data_file, "%s", slash ? slash + 1 : o->data);
    }
    /* --val: the same graph forward-only beside the training plan, on its own buffers; it
     * takes the weights after each eval_interval-th update */
    Plan *epl = NULL;
    Backend *eb = NULL;
    Batcher *val = NULL;
    char *eval_dir = NULL;
    void *weights_copy = NULL;
    int64_t eval_every = o->eval_interval > 0 ? o->eval_interval : 200;
    if (o->val) {
        eb = open_eval(b->pl, o->backend, &eval_dir, &epl);
        val = train_batches(pl, o->val, 0);
        if (epl->p->buffer_bytes[BUF_PARAMS] != pl->p->buffer_bytes[BUF_PARAMS])
            die("train --val: the forward plan's parameters (%lld bytes) are not the training plan's (%lld)",
                (long long)epl->p->buffer_bytes[BUF_PARAMS], (long long)pl->p->buffer_bytes[BUF_PARAMS]);
        weights_copy = xmalloc((size_t)pl->p->buffer_bytes[BUF_PARAMS]);
    }
    ValResult vres[SLOTS] = {{0}}; /* by update, as the reports lag the updates */
    Report r = {0};
    r.metrics = -1;
    r.saved = o->resume ? start : -1;
    if (out) {
        keep_tokenizer(o, data->file, out);
        r.metrics_path = path_join(out, "metrics.jsonl");
        r.metrics = open_metrics(r.metrics_path, start, &r.metrics_bytes);
    }
    r.interval = o->log_interval > 0 ? o->log_interval : t->log_interval > 0 ? t->log_interval : 100;
    monitor_init(&r.monitor, pl, r.interval);
    if (set->fallback && !o->no_fallback)
        monitor_fallback(&r.monitor, set->overflow_rate, set->window, set->min_scale, set->fallback_what, LAG);
    if (o->resume) {
        char *history = path_join(o->resume, "metrics.jsonl"); /* cut back to the checkpoint's update by now */
        monitor_resume(&r.monitor, history, start);
        free(history);
    }
    r.monitor.fallback_at = fallback_at; /* a fallback that fired stays, --no-fallback or not */
    r.steps = steps;
    r.epochs = (steps * B * t->accumulation * world + data->rows - 1) / data->rows;
    r.quiet = o->quiet;
    r.tokens_per_update = B * T * t->accumulation * world; /* the job's */
    r.t0 = r.t_last = now_seconds();
    r.last_logged = start;
    r.last_val = NAN;
    int64_t n_params = 0;
    r.flops_per_token = flops_per_token(pl, &n_params);
    r.peak_flops = b->peak_flops;
    if (!o->quiet) /* the banner: what runs, on what, for how long */
        printf("mmc train: %s (graph %s, policy %s) | %.2fM parameters | %s: %lld rows of seq %lld | %lld updates of "
               "%lld x %d rows%s | %s (%s)\n",
               o->plan_name ? o->plan_name : o->plan_dir, pl->g->name, pl->g->policy.name, (double)n_params / 1e6, o->data, (long long)data->rows,
               (long long)T, (long long)steps, (long long)B, t->accumulation, o->val ? ", --val" : "", b->name,
               b->device ? b->device : "?");

    size_t batch_bytes = (size_t)(B * T) * sizeof(int32_t), loss_bytes = dtype_size(pl->g->loss->dtype);
    size_t state_bytes = MMC_STATE_BYTES((size_t)pl->g->n_params);
    Slot slot[SLOTS];
    int64_t epoch_of[SLOTS] = {0};
    for (int s = 0; s < SLOTS; s++) {
        slot[s].ids = xcalloc((size_t)t->accumulation, sizeof(int32_t *));
        slot[s].labels = xcalloc((size_t)t->accumulation, sizeof(int32_t *));
        for (int a = 0; a < t->accumulation; a++) {
            slot[s].ids[a] = b->host_alloc(b, batch_bytes);
            slot[s].labels[a] = b->host_alloc(b, batch_bytes);
        }
        slot[s].losses = b->host_alloc(b, loss_bytes * (size_t)t->accumulation);
        slot[s].state = b->host_alloc(b, state_bytes);
        slot[s].ticket = -1;
    }
    float *inf = b->host_alloc(b, sizeof(float));
    *inf = INFINITY;
    const Node *loss_node = b->pl->g->loss;
    int64_t u = start, reported = start;
    int64_t bytes_base = 0, bytes_peak = 0; /* the device memory of the backends before this one */
    /* --find-overflow: each update waited for, the state it started from kept, until one
     * overflows and find_overflow names the op */
    int finding = o->find_overflow;
    MmcStepState before;
    if (finding) b->read(b, BUF_STATE, 0, &before, sizeof before);
    interrupted = 0;
    catch_signals();
    for (; u < steps; u++) {
        Slot *sl = &slot[u % SLOTS];
        Plan *want = plan_for(set, r.monitor.fallback_at, u);
        if (want != b->pl) { /* a new phase, or the fallback: the buffers change hands */
            for (; reported < u; reported++) {
                Slot *rs = &slot[reported % SLOTS];
                b->wait(b, rs->ticket);
                report(&r, b, rs, reported, epoch_of[reported % SLOTS], &vres[reported % SLOTS]);
            }
            for (int k = 0; k < SLOTS; k++) slot[k].ticket = -1; /* all waited for, on the backend that goes */
            /* device memory is measured from each backend's start: carry the first one's baseline */
            int64_t before = b->probe ? b->probe->device_bytes(b) : -1;
            Backend *next = backend_open(want, o->backend, "train");
            init_consts(next);
            next->adopt(next, b);
            if (dist) train_dist_attach(dist, next);
            if (b->probe && b->probe->device_bytes(b) + bytes_base > bytes_peak) bytes_peak = b->probe->device_bytes(b) + bytes_base;
            bytes_base += before;
            b->destroy(b);
            b = next;
            loss_node = b->pl->g->loss; /* where this plan keeps it (the inputs are where they were, plan_set.c) */
            if (eb) { /* the evaluation runs the new plan's policy */
                eb->destroy(eb);
                plan_remove_temp(eval_dir);
                free(eval_dir);
                eb = open_eval(b->pl, o->backend, &eval_dir, &epl);
            }
            if (!o->quiet) printf("update %lld: %s\n", (long long)(u + 1), plan_words(set, b->pl));
        }
        sl->entered = NULL;
        if (entering(set, r.monitor.fallback_at, u)) {
            enter_plan(b);
            sl->entered = b->pl->g->policy.name;
            if (finding) b->read(b, BUF_STATE, 0, &before, sizeof before);
        } else if (u == 0 && (set->n_phases > 1 || set->fallback)) sl->entered = b->pl->g->policy.name;
        if (sl->ticket >= 0) b->wait(b, sl->ticket); /* its previous update was reported already */
        for (int a = 0; a < t->accumulation; a++) {
            batcher_next(data, sl->ids[a], sl->labels[a]);
            b->write_async(b, BUF_IO, ids_leaf->offset, sl->ids[a], (int64_t)batch_bytes);
            b->write_async(b, BUF_IO, labels_leaf->offset, sl->labels[a], (int64_t)batch_bytes);
            b->run_phase(b, PHASE_MICRO);
            b->read_async(b, loss_node->buffer, loss_node->offset, sl->losses + (size_t)a * loss_bytes, (int64_t)loss_bytes);
        }
        if (u + 1 == o->inject_inf) b->write_async(b, BUF_GRADS, 0, inf, sizeof *inf);
        b->run_phase(b, PHASE_UPDATE);
        b->read_async(b, BUF_STATE, 0, sl->state, (int64_t)state_bytes);
        sl->ticket = b->fence(b);
        if (finding) {
            b->wait(b, sl->ticket);
            if (sl->state->skipped > before.skipped) {
                OverflowReport rep = find_overflow(b, &before, sl->ids, sl->labels, batch_bytes);
                char *text = overflow_text(&rep, u + 1), *json = overflow_json(&rep, u + 1);
                fputs(text, stdout);
                fflush(stdout);
                if (out) {
                    char *path = path_join(out, "overflow.json");
                    write_file_atomic(path, json, strlen(json));
                    free(path);
                }
                free(text), free(json);
                finding = 0;
            }
            before = *sl->state;
        }
        epoch_of[u % SLOTS] = (data->position - 1) / data->rows + 1; /* of the update's last row */
        int stop = u + 1 == o->stop_after || interrupted;
        if (eb && ((u + 1) % eval_every == 0 || u + 1 == steps || stop)) {
            double t0 = now_seconds();
            b->read(b, BUF_PARAMS, 0, weights_copy, pl->p->buffer_bytes[BUF_PARAMS]); /* waits for this update */
            eb->write(eb, BUF_PARAMS, 0, weights_copy, pl->p->buffer_bytes[BUF_PARAMS]);
            ValResult *v = &vres[u % SLOTS];
            val->position = 0;
            v->loss = eval_batches(eb, val, o->val_batches, &v->targets, &v->batches);
            v->update = u + 1;
            v->seconds = now_seconds() - t0;
            r.paused += v->seconds;
            r.paused_total += v->seconds;
        }
        if (out && ((o->save_interval > 0 && (u + 1) % o->save_interval == 0) || u + 1 == steps || stop)) {
            /* The metrics of every update up to this one are on disk before the checkpoint
             * that ends them: a resume from it finds them all. The checkpoint's reads wait
             * for this update anyway, so reporting the lagging updates now costs no wait. */
            for (; reported <= u; reported++) {
                Slot *rs = &slot[reported % SLOTS];
                b->wait(b, rs->ticket);
                report(&r, b, rs, reported, epoch_of[reported % SLOTS], &vres[reported % SLOTS]);
            }
            metrics_sync(&r);
            pos.rows = data->position;
            checkpoint_save(b, out, &pos);
            r.saved = u + 1;
        }
        for (; reported <= u - LAG; reported++) {
            Slot *rs = &slot[reported % SLOTS];
            b->wait(b, rs->ticket);
            report(&r, b, rs, reported, epoch_of[reported % SLOTS], &vres[reported % SLOTS]);
        }
        if (stop) {
            u++;
            break;
        }
    }
    for (; reported < u; reported++) {
        Slot *rs = &slot[reported % SLOTS];
        b->wait(b, rs->ticket);
        report(&r, b, rs, reported, epoch_of[reported % SLOTS], &vres[reported % SLOTS]);
    }
    if (eb) {
        eb->destroy(eb);
        batcher_close(val);
        plan_remove_temp(eval_dir);
        free(eval_dir), free(weights_copy);
    }
    if (r.metrics >= 0) {
        metrics_sync(&r);
        close(r.metrics);
    }
    free(r.metrics_path);
    monitor_free(&r.monitor);
    planset_free(set);
    if (lock >= 0) close(lock);
    if (o->result) {
        o->result->updates = u - start;
        o->result->seconds = now_seconds() - r.t0 - r.paused_total;
        o->result->tokens = (double)(u - start) * (double)r.tokens_per_update;
        int64_t now_bytes = b->probe ? b->probe->device_bytes(b) + bytes_base : -1;
        o->result->device_bytes = b->probe ? (now_bytes > bytes_peak ? now_bytes : bytes_peak) : -1;
    }
    for (int s = 0; s < SLOTS; s++) free(slot[s].ids), free(slot[s].labels);
    batcher_close(data);
    b->destroy(b);
    /* every rank ends at the same update at the run's end and at --stop-after; a signal
     * stops each rank where it happens to be */
    train_dist_end(dist, u >= steps || (o->stop_after > 0 && u == o->stop_after));
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
    if (interrupted && u < steps) {
        if (out) fprintf(stderr, "train: interrupted after update %lld of %lld; checkpoint in %s (continue with --resume %s)\n",
                         (long long)u, (long long)steps, out, out);
        else fprintf(stderr, "train: interrupted after update %lld of %lld (no --out: nothing saved)\n", (long long)u,
                     (long long)steps);
        return 128 + interrupted;
    }
    return 0;
}
