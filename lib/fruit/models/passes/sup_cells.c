/* The pointwise work of one time step of the fused stack-RNN pass
 * (fruit.models.passes.sup_pass): an LSTM or simple-RNN cell, the stack heads and one
 * superposition-stack update, each forward and backward. The pass calls one of these
 * between consecutive matrix products, so a step costs its products plus a handful of
 * calls instead of some eighty small PyTorch operations.
 *
 * Each function computes exactly what its namesake in
 * fruit.models.passes.sup_cells.TorchCells computes with PyTorch operations (that class
 * is the reference; the tests compare the two in float64 and float32).
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

/* ---- stack heads and one superposition-stack update ---------------------------------- */

/* head (B, 3+m): action logits (push, pop, no-op), then the pushed vector's logits.
 * Writes probs (B, 3) = softmax, pushed (B, m) = σ, and the updated stack
 * new (B, H, m) from old (B, h, m), element 0 the top, elements past h zero:
 *     new[0] = push v + noop old[0] + pop old[1]
 *     new[i] = push old[i-1] + noop old[i] + pop old[i+1]      (0 < i < H)
 * and its top new[0] into reading (rows ldr). */
void stack_forward(idx B, idx m, idx h, idx H, const real *restrict head, real *restrict probs,
                   real *restrict pushed, const real *restrict old, real *restrict new_,
                   real *restrict reading, idx ldr)
{
    for (idx b = 0; b < B; b++) {
        const real *logit = head + b * (3 + m), *O = old + b * h * m;
        real *p = probs + b * 3, *v = pushed + b * m, *N = new_ + b * H * m;
        real top = logit[0] > logit[1] ? logit[0] : logit[1];
        top = top > logit[2] ? top : logit[2];
        real e0 = exp(logit[0] - top), e1 = exp(logit[1] - top), e2 = exp(logit[2] - top);
        real s = e0 + e1 + e2, push = e0 / s, pop = e1 / s, noop = e2 / s;
        p[0] = push;
        p[1] = pop;
        p[2] = noop;
        for (idx j = 0; j < m; j++) v[j] = sigmoid(logit[3 + j]);
        for (idx i = 0; i < H; i++) {
            /* An element past the old stack's end is zero: it gets weight 0 on a stand-in
             * row (v, which is finite), so one loop serves every row. */
            const real *same = i < h ? O + i * m : v, *up = i + 1 < h ? O + (i + 1) * m : v;
            const real *down = i == 0 ? v : i - 1 < h ? O + (i - 1) * m : v;
            real w_same = i < h ? noop : 0, w_up = i + 1 < h ? pop : 0;
            real w_down = i == 0 || i - 1 < h ? push : 0;
            real *row = N + i * m;
            for (idx j = 0; j < m; j++)
                row[j] = w_same * same[j] + w_up * up[j] + w_down * down[j];
        }
        memcpy(reading + b * ldr, N, (size_t)m * sizeof(real));
    }
}

/* The adjoint of stack_forward. g (B, H, m) = dL/dnew; dL/dreading = g_a (rows lda;
 * NULL: none) + g_b (contiguous) is added to its row 0 in place. Writes g_old (B, h, m)
 * = dL/dold and dhead (B, 3+m) = dL/dhead through the softmax and the sigmoid. */
void stack_backward(idx B, idx m, idx h, idx H, const real *restrict old,
                    const real *restrict probs, const real *restrict pushed, real *restrict g,
                    const real *restrict g_a, idx lda, const real *restrict g_b,
                    real *restrict g_old, real *restrict dhead)
{
    for (idx b = 0; b < B; b++) {
        const real *O = old + b * h * m, *p = probs + b * 3, *v = pushed + b * m;
        real *Gb = g + b * H * m, *dO = g_old + b * h * m, *dh = dhead + b * (3 + m);
        real push = p[0], pop = p[1], noop = p[2];
        for (idx j = 0; j < m; j++) Gb[j] += (g_a ? g_a[b * lda + j] : 0) + g_b[b * m + j];
        /* dL/dprobs: new[i] = noop old[i] + pop old[i+1] + push (old[i-1], or v for i = 0) */
        real g_push = dot(m, Gb, v), g_pop = 0, g_noop = 0;
        for (idx i = 0; i < H; i++) { /* stand-in rows as in stack_forward; their sums unused */
            const real *row = Gb + i * m;
            const real *same = i < h ? O + i * m : v, *up = i + 1 < h ? O + (i + 1) * m : v;
            const real *down = i >= 1 && i - 1 < h ? O + (i - 1) * m : v;
            real s_same = 0, s_up = 0, s_down = 0;
            for (idx j = 0; j < m; j++) {
                s_same += row[j] * same[j];
                s_up += row[j] * up[j];
                s_down += row[j] * down[j];
            }
            if (i < h) g_noop += s_same;
            if (i + 1 < h) g_pop += s_up;
            if (i >= 1 && i - 1 < h) g_push += s_down;
        }
        /* dL/dold[k]: old[k] feeds new[k] (noop), new[k-1] (pop), new[k+1] (push); a row
         * of g past its end gets weight 0 on a stand-in row (g's first, finite) */
        for (idx k = 0; k < h; k++) {
            const real *same = k < H ? Gb + k * m : Gb, *next = k + 1 < H ? Gb + (k + 1) * m : Gb;
            const real *prev = k >= 1 && k - 1 < H ? Gb + (k - 1) * m : Gb;
            real w_same = k < H ? noop : 0, w_prev = k >= 1 && k - 1 < H ? pop : 0;
            real w_next = k + 1 < H ? push : 0;
            real *row = dO + k * m;
            for (idx j = 0; j < m; j++)
                row[j] = w_same * same[j] + w_prev * prev[j] + w_next * next[j];
        }
        /* softmax': dL/dlogit_k = p_k (dL/dp_k - sum_l p_l dL/dp_l) */
        real mean = push * g_push + pop * g_pop + noop * g_noop;
        dh[0] = push * (g_push - mean);
        dh[1] = pop * (g_pop - mean);
        dh[2] = noop * (g_noop - mean);
        for (idx j = 0; j < m; j++) dh[3 + j] = push * Gb[j] * v[j] * (1 - v[j]);
    }
}
