/* The pointwise work of one time step of the fused stack-RNN pass
 * (fruit.models.passes.sup_pass): an LSTM or simple-RNN cell and the stack heads, each
 * forward and backward (the superposition-stack update between the heads' forward and
 * backward is fruit/stacks/fast/superposition.c's sup_step_forward / sup_step_backward).
 * The pass calls one of these between consecutive matrix products, so a step costs its
 * products plus a handful of calls instead of some eighty small PyTorch operations.
 *
 * Each piece computes what its part of fruit.models.passes.sup_cells.TorchCells computes
 * with PyTorch operations (that class is the reference; the tests compare the two in
 * float64 and float32).
 * fruit.kernels.build compiles this file twice, with
 * REAL = float and REAL = double.
 *
 * Layout: every matrix is row-major with unit column stride. Arguments named ld* are
 * row strides in elements, for rows that sit inside a wider buffer; all other matrices
 * are contiguous. B is the batch size, d the hidden size, m the stack-vector size.
 */
#include <stddef.h>
#include <string.h>
#include <tgmath.h> /* exp() of a float is expf, vectorised by glibc's libmvec */

typedef REAL real;
typedef ptrdiff_t idx;

static inline real sigmoid(real x) { return 1 / (1 + exp(-x)); }

/* tanh x = 2 σ(2x) - 1, as in the PyTorch reference. */
static inline real tanh_(real x) { return 2 * sigmoid(2 * x) - 1; }

/* out = a + b * mask (mask NULL: a + b) for one row of d. */
static inline void sum_row(idx d, const real *restrict a, const real *restrict b,
                           const real *restrict mask, real *restrict out)
{
    if (mask)
        for (idx j = 0; j < d; j++) out[j] = a[j] + b[j] * mask[j];
    else
        for (idx j = 0; j < d; j++) out[j] = a[j] + b[j];
}

static inline real dot(idx m, const real *restrict x, const real *restrict y)
{
    real s = 0;
    for (idx j = 0; j < m; j++) s += x[j] * y[j];
    return s;
}

/* Drop(h) = h * mask (mask NULL: h) into the next layer's input row. */
static inline void drop_row(idx d, const real *restrict h, const real *restrict mask,
                            real *restrict up)
{
    if (mask)
        for (idx j = 0; j < d; j++) up[j] = h[j] * mask[j];
    else
        memcpy(up, h, (size_t)d * sizeof(real));
}

/* ---- LSTM cell ------------------------------------------------------------------- */

/* z (B, 4d): pre-activations of the gates i, f, g, o. Writes a (B, 4d) = σ(i), σ(f),
 * tanh(g), σ(o); c (B, d) = f c_prev + i g; tc (B, d) = tanh c; h = o tc (rows ldh);
 * and, unless up is NULL (top layer), Drop(h) (rows ldu). */
void lstm_forward(idx B, idx d, const real *restrict z, real *restrict a,
                  const real *restrict c_prev, real *restrict c, real *restrict tc,
                  real *restrict h, idx ldh, const real *restrict mask, real *restrict up,
                  idx ldu)
{
    for (idx b = 0; b < B; b++) {
        const real *zb = z + b * 4 * d;
        real *i = a + b * 4 * d, *f = i + d, *g = i + 2 * d, *o = i + 3 * d;
        const real *cp = c_prev + b * d;
        real *cb = c + b * d, *tcb = tc + b * d, *hb = h + b * ldh;
        for (idx j = 0; j < 2 * d; j++) i[j] = sigmoid(zb[j]); /* i and f */
        for (idx j = 0; j < d; j++) g[j] = tanh_(zb[2 * d + j]);
        for (idx j = 0; j < d; j++) o[j] = sigmoid(zb[3 * d + j]);
        for (idx j = 0; j < d; j++) {
            cb[j] = f[j] * cp[j] + i[j] * g[j];
            tcb[j] = tanh_(cb[j]);
            hb[j] = o[j] * tcb[j];
        }
        if (up) drop_row(d, hb, mask ? mask + b * d : NULL, up + b * ldu);
    }
}

/* The adjoint of lstm_forward. dL/dh = dh_a + dh_b * mask (rows lda, ldb); dc (B, d)
 * holds dL/dc from the next step on entry (through c_next = f_next c + ...) and
 * dL/dc_prev on return. Writes dz (B, 4d) = dL/d(pre-activations). */
void lstm_backward(idx B, idx d, const real *restrict dh_a, idx lda, const real *restrict dh_b,
                   idx ldb, const real *restrict mask, const real *restrict a,
                   const real *restrict c_prev, const real *restrict tc, real *restrict dc,
                   real *restrict dz)
{
    for (idx b = 0; b < B; b++) {
        const real *i = a + b * 4 * d, *f = i + d, *g = i + 2 * d, *o = i + 3 * d;
        const real *cp = c_prev + b * d, *t = tc + b * d;
        real *dcb = dc + b * d, *dzb = dz + b * 4 * d, *dh = dzb + 3 * d;
        sum_row(d, dh_a + b * lda, dh_b + b * ldb, mask ? mask + b * d : NULL, dh);
        for (idx j = 0; j < d; j++) { /* dh[j] is read before dz_o[j] overwrites it */
            real dhj = dh[j], dcj = dcb[j] + dhj * o[j] * (1 - t[j] * t[j]);
            dzb[j] = dcj * g[j] * i[j] * (1 - i[j]);
            dzb[d + j] = dcj * cp[j] * f[j] * (1 - f[j]);
            dzb[2 * d + j] = dcj * i[j] * (1 - g[j] * g[j]);
            dzb[3 * d + j] = dhj * t[j] * o[j] * (1 - o[j]);
            dcb[j] = dcj * f[j];
        }
    }
}

/* ---- simple RNN cell --------------------------------------------------------------- */

/* z (B, d) -> h = tanh z (rows ldh) and Drop(h) (rows ldu) unless up is NULL. */
void rnn_forward(idx B, idx d, const real *restrict z, real *restrict h, idx ldh,
                 const real *restrict mask, real *restrict up, idx ldu)
{
    for (idx b = 0; b < B; b++) {
        real *hb = h + b * ldh;
        for (idx j = 0; j < d; j++) hb[j] = tanh_(z[b * d + j]);
        if (up) drop_row(d, hb, mask ? mask + b * d : NULL, up + b * ldu);
    }
}

/* dz (B, d) = (dh_a + dh_b * mask) (1 - h²), h in rows ldh. */
void rnn_backward(idx B, idx d, const real *restrict dh_a, idx lda, const real *restrict dh_b,
                  idx ldb, const real *restrict mask, const real *restrict h, idx ldh,
                  real *restrict dz)
{
    for (idx b = 0; b < B; b++) {
        const real *hb = h + b * ldh;
        real *dzb = dz + b * d;
        sum_row(d, dh_a + b * lda, dh_b + b * ldb, mask ? mask + b * d : NULL, dzb); /* dL/dh */
        for (idx j = 0; j < d; j++) dzb[j] *= 1 - hb[j] * hb[j];
    }
}

/* ---- the stack heads (the update itself: fruit/stacks/fast/superposition.c) ---------- */

/* head (rows ldh, 3+m each): action logits (push, pop, no-op), then the pushed vector's
 * logits -> probs (B, 3) = softmax, pushed (B, m) = σ. */
void head_forward(idx B, idx m, const real *restrict head, idx ldh, real *restrict probs,
                  real *restrict pushed)
{
    for (idx b = 0; b < B; b++) {
        const real *logit = head + b * ldh;
        real *p = probs + b * 3, *v = pushed + b * m;
        real top = logit[0] > logit[1] ? logit[0] : logit[1];
        top = top > logit[2] ? top : logit[2];
        real e0 = exp(logit[0] - top), e1 = exp(logit[1] - top), e2 = exp(logit[2] - top);
        real s = e0 + e1 + e2;
        p[0] = e0 / s;
        p[1] = e1 / s;
        p[2] = e2 / s;
        for (idx j = 0; j < m; j++) v[j] = sigmoid(logit[3 + j]);
    }
}

/* The adjoint of head_forward, in place: dhead (rows ldd, 3+m each) holds dL/dprobs, then
 * dL/dpushed on entry, and dL/dhead on return (through the softmax and the sigmoid). */
void head_backward(idx B, idx m, const real *restrict probs, const real *restrict pushed,
                   real *restrict dhead, idx ldd)
{
    for (idx b = 0; b < B; b++) {
        const real *p = probs + b * 3, *v = pushed + b * m;
        real *dh = dhead + b * ldd;
        /* softmax': dL/dlogit_k = p_k (dL/dp_k - sum_l p_l dL/dp_l) */
        real mean = p[0] * dh[0] + p[1] * dh[1] + p[2] * dh[2];
        for (idx k = 0; k < 3; k++) dh[k] = p[k] * (dh[k] - mean);
        for (idx j = 0; j < m; j++) dh[3 + j] *= v[j] * (1 - v[j]);
    }
}
