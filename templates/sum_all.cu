// Sums all {{N}} elements in one block (used by test graphs).
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    {{R}} acc = 0;
    for (long i = threadIdx.x; i < {{N}}L; i += {{BLOCK}}) {
{{PROLOGUE}}
        acc += {{X}};
    }
    {{R}} {{VA}} = block_sum(acc, red);
    if (threadIdx.x == 0) {
        const long i = 0;
{{EPILOGUE}}
    }
}
