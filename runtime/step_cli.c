/* step_cli: `mmc step`, one micro-step (forward and backward) from given weights on the first
 * batch of a token file, writing the loss and every gradient as safetensors: how mmc is
 * compared tensor by tensor with PyTorch (tests/reference/minimind_torch.py). Gradients
 * are as the backward pass leaves them: multiplied by the loss scale given with --scale
 * (metadata "scale"), before any unscaling or clipping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "cli.h"
#include "data.h"
#include "init.h"
#include "safetensors.h"
#include "train.h"
#include "util.h"

int cmd_step(int argc, char **argv) {
    const char *dir = NULL, *data = NULL, *init = NULL, *out = NULL, *backend = "cuda";
    double scale = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && i + 1 >= argc) die("step: %s needs a value", a);
        if (!strcmp(a, "--data")) data = argv[++i];
        else if (!strcmp(a, "--init")) init = argv[++i];
        else if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--backend")) backend = argv[++i];
        else if (!strcmp(a, "--scale")) {
            scale = option_double("step", a, argv[++i]);
            if (!(scale > 0)) die("step: --scale needs a loss scale above 0, got '%s'", argv[i]);
        }
        else if (a[0] == '-') die("step: unknown option %s", a);
        else dir = a;
    }
    if (!dir || !data || !out) die("step: usage: mmc step PLAN_DIR --data FILE [--init W.safetensors] -o OUT.safetensors");
    Plan *pl = plan_load(dir);
    Backend *b = backend_open(pl, backend, "step");
    init_consts(b);
    init_params(b, 1);
    if (init) checkpoint_load_weights(b, init);
    MmcStepState st = init_state(pl, 1);
    st.scale = (float)scale;
    st.loss_seed = (float)(scale / pl->g->train.accumulation);
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    train_load_batch(b, data);
    b->run_phase(b, PHASE_MICRO);
    double loss = read_loss(b);
    int64_t bytes = pl->p->buffer_bytes[BUF_GRADS];
    unsigned char *grads = xmalloc((size_t)bytes + 1);
    b->read(b, BUF_GRADS, 0, grads, bytes);
    StWriter *w = st_writer();
    DType m = pl->g->policy.master;
    for (int i = 0; i < pl->g->n_params; i++) {
        const Param *p = &pl->g->params[i];
        st_add(w, p->node->name, m, &p->node->shape, grads + p->offset * (int64_t)dtype_size(m),
               shape_numel(&p->node->shape) * (int64_t)dtype_size(m));
    }
    char lbuf[64], sbuf[64];
    snprintf(lbuf, sizeof lbuf, "%.17g", loss);
    snprintf(sbuf, sizeof sbuf, "%.17g", scale);
    st_add_meta(w, "loss", lbuf);
    st_add_meta(w, "scale", sbuf);
    st_add_meta(w, "policy", pl->g->policy.name);
    st_write(w, out);
    printf("loss %.9g\n", loss);
    free(grads);
    b->destroy(b);
    return 0;
}
