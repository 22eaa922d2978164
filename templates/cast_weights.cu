// Casts each weight to its working dtype once per step (autocast's cast cache): one
// segment of the params/consts buffer to the weights buffer per blockIdx.y.
{{TABLES}}
extern "C" __global__ void __launch_bounds__(256) {{NAME}}(const MmcBuffers b) {
    const int seg = blockIdx.y;
{{BODY}}
}
