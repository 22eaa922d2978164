// {{LABEL}} (rope_backward %{{ID}}) applied to each row as the kernel stores it:
// dx[j] = dy[j] cos[j] + (j < {{HALF}} ? dy[j + {{HALF}}] sin[j + {{HALF}}] : -dy[j - {{HALF}}] sin[j - {{HALF}}]),
// each branch rounded to x's dtype, then the sum, as rope_backward_wide.cu computes it from the
// stored gradient. get() gives flash::store_rows the 8 elements from column j0 of a staged row
// of sequence position t.
struct {{NAME}}_rope {
    const {{TAB}} *cos, *sin;
    __device__ __forceinline__ uint4 get(const {{E}} *row, int j0, int t) const {
        const int jp0 = j0 < {{HALF}} ? j0 + {{HALF}} : j0 - {{HALF}};
        float da[8], db[8], cs[8], sn[8], o[8];
        uint4 out;
        ldv(row, j0, da);
        ldv(row, jp0, db);
        ldv(cos, (long)t * {{HD}} + j0, cs);
        ldv(sin, (long)t * {{HD}} + jp0, sn);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float direct = {{RDX}}({{RDC}}(mmc_mul(da[k], cs[k])));
            const float rot = {{RDX}}({{RDC}}(mmc_mul(db[k], sn[k])));
            o[k] = {{RDO}}(mmc_add(direct, j0 < {{HALF}} ? rot : -rot));
        }
        stv(({{E}} *)&out, 0, o);
        return out;
    }
};
