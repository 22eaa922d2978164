// How many of the {{ROWS}} labels are not {{IGNORE}}: the divisor of the mean cross-entropy's
// gradient. One block, each thread counting a strided share in an integer, then the block's
// sum in a fixed order: exact, so it equals the count the loss kernel finds for itself. It
// reads only the step's labels, so it runs on the side stream from the phase's start and
// the gradient need not wait for every row of the loss.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ long long red[32];
    long long kept = 0;
    for (long r = threadIdx.x; r < {{ROWS}}L; r += {{BLOCK}}) kept += ld({{LABELS}}, r) != {{IGNORE}};
    kept = block_sum(kept, red);
    if (threadIdx.x == 0) st({{OUT}}, 0, (double)kept); // as the loss kernel stores its count
}
