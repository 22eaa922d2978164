// Update phase, kernel 3 of 3 (one thread): the loss scaler's update (step_state.h) and the
// step counters, then the loss-gradient seed for the next micro-steps.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
    MmcStepState *s = (MmcStepState *)b.state;
    const bool found = s->found_inf != 0.0f;
    if ({{SCALING}}) {
        const MmcScaler p = { {{GROWTH}}, {{BACKOFF}}, {{MAX}}, {{MIN}}, {{INTERVAL}}, {{HYSTERESIS}}, {{FIXED}} };
        mmc_scaler_update(s, &p);
    }
    if (found) s->skipped += 1;
    else s->adam_step += 1;
    s->update += 1;
    s->found_inf = 0.0f;
    s->loss_seed = (float)((double)s->scale / {{ACCUM}});
}
