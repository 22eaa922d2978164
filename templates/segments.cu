// {{WHAT}}, one segment of the table per node. Segment s takes blocks
// [first[s], first[s + 1]) of the grid, {{PER_BLOCK}} elements a block; a block finds its
// segment by bisection of the table.
{{TABLES}}
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
    int seg = 0, hi = {{N}};
    while (hi - seg > 1) {
        const int mid = (seg + hi) / 2;
        if ({{NAME}}_first[mid] <= (long)blockIdx.x) seg = mid;
        else hi = mid;
    }
    const long e0 = ((long)blockIdx.x - {{NAME}}_first[seg]) * {{PER_BLOCK}};
{{BODY}}
}
