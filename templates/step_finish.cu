// Update phase, kernel 3 of 3 (one thread): GradScaler.update and the step counters, then
// the loss-gradient seed for the next micro-steps.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
    MmcStepState *s = (MmcStepState *)b.state;
    const bool found = s->found_inf != 0.0f;
    if ({{SCALING}}) {
        if (found) {
            s->scale = (float)((double)s->scale * {{BACKOFF}});
            s->growth_tracker = 0;
        } else if (s->growth_tracker + 1 == {{INTERVAL}}) {
            const float grown = (float)((double)s->scale * {{GROWTH}});
            if (isfinite(grown)) s->scale = grown;
            s->growth_tracker = 0;
        } else {
            s->growth_tracker += 1;
        }
    }
    if (found) s->skipped += 1;
    else s->adam_step += 1;
    s->update += 1;
    s->found_inf = 0.0f;
    s->loss_seed = (float)((double)s->scale / {{ACCUM}});
}
