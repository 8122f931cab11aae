/* The superposition stack's updates and their adjoints in C, the same computation as
 * fruit.stacks.fast.superposition_update (PyTorch operations, one autograd Function of
 * about twenty small operations per update), in two forms:
 *   sup_forward / sup_backward: all n updates of every example in one call, and their
 *     adjoint in another (fruit.stacks.fast.superposition_native: stack attention, whose
 *     actions and pushed vectors are known for the whole sequence before the first update);
 *   sup_step_forward / sup_step_backward: one update of every example of a batch (the
 *     stack RNNs' fused pass, fruit.models.passes.sup_cells, whose controller needs the
 *     reading of step t before update t+1).
 *
 * Update t (1-based) of an example, with probabilities p_t = (push, pop, no-op), pushed
 * vector v_t and V_0 empty:
 *     V_t[0] = push v_t      + noop V_{t-1}[0] + pop V_{t-1}[1]
 *     V_t[i] = push V_{t-1}[i-1] + noop V_{t-1}[i] + pop V_{t-1}[i+1]      (i >= 1)
 * reading r_t = V_t[0]. Only the top H_t = min(t, n - t + 1) rows of V_t can still
 * reach a later reading (exact truncation), so only they are computed.
 *
 * Layout (row-major, contiguous; REAL is float or double, fruit.kernels.build compiles
 * both): probs (B, n, 3); pushed, readings and their gradients (B, n, m); stacks
 * (B, S, m) holds V_1 .. V_{n-1} of each example one after the other (S = sum of their
 * heights), written by the forward and read by the backward; work (2 * H_max * m) is
 * the backward's scratch for dL/dV_t and dL/dV_{t-1}, H_max = (n + 1) / 2 + 1.
 */
#include <stddef.h>
#include <string.h>

typedef REAL real;
typedef ptrdiff_t idx;

static inline idx height(idx t, idx n) { return t < n - t + 1 ? t : n - t + 1; }

/* Rows stored for a sequence of n updates: the heights of V_1 .. V_{n-1}. */
idx sup_stored_rows(idx n)
{
    idx S = 0;
    for (idx t = 1; t < n; t++) S += height(t, n);
    return S;
}

static inline real dot(idx m, const real *restrict x, const real *restrict y)
{
    real s = 0;
    for (idx j = 0; j < m; j++) s += x[j] * y[j];
    return s;
}

/* new (H, m) from old (h, m): rows of old past its end are zero. Each row takes the
 * weights of the terms that exist, on a stand-in row (v, finite) for those that don't,
 * so that one loop serves every row. */
static void update(idx m, idx h, idx H, const real *restrict old, const real *restrict p,
                   const real *restrict v, real *restrict new_)
{
    real push = p[0], pop = p[1], noop = p[2];
    for (idx i = 0; i < H; i++) {
        const real *same = i < h ? old + i * m : v, *up = i + 1 < h ? old + (i + 1) * m : v;
        const real *down = i == 0 ? v : i - 1 < h ? old + (i - 1) * m : v;
        real w_same = i < h ? noop : 0, w_up = i + 1 < h ? pop : 0;
        real w_down = i == 0 || i - 1 < h ? push : 0;
        real *row = new_ + i * m;
        for (idx j = 0; j < m; j++) row[j] = w_same * same[j] + w_up * up[j] + w_down * down[j];
    }
}

void sup_forward(idx B, idx n, idx m, const real *restrict probs, const real *restrict pushed,
                 real *restrict stacks, real *restrict readings)
{
    idx S = sup_stored_rows(n);
    for (idx b = 0; b < B; b++) {
        const real *p = probs + b * n * 3, *v = pushed + b * n * m, *old = NULL;
        real *slot = stacks + b * S * m, *r = readings + b * n * m;
        idx h = 0;
        for (idx t = 1; t <= n; t++) {
            idx H = height(t, n);
            real *new_ = t < n ? slot : r + (n - 1) * m; /* V_n is one row: the last reading */
            update(m, h, H, old, p + (t - 1) * 3, v + (t - 1) * m, new_);
            if (t < n) memcpy(r + (t - 1) * m, new_, (size_t)m * sizeof(real));
            old = new_, h = H, slot += H * m;
        }
    }
}

/* The adjoint of update for one example: g (H, m) = dL/dnew, the reading's part
 * included -> g_old (h, m) = dL/dold, gp (3) = dL/dp with respect to the probabilities
 * themselves, gv (m) = dL/dv. */
static void adjoint(idx m, idx h, idx H, const real *restrict old, const real *restrict p,
                    const real *restrict v, const real *restrict g, real *restrict g_old,
                    real *restrict gp, real *restrict gv)
{
    real push = p[0], pop = p[1], noop = p[2];
    /* dL/dp: the terms of every row of new (as in update; stand-in rows unused) */
    real g_push = dot(m, g, v), g_pop = 0, g_noop = 0;
    for (idx i = 0; i < H; i++) {
        const real *row = g + i * m;
        if (i < h) g_noop += dot(m, row, old + i * m);
        if (i + 1 < h) g_pop += dot(m, row, old + (i + 1) * m);
        if (i >= 1 && i - 1 < h) g_push += dot(m, row, old + (i - 1) * m);
    }
    gp[0] = g_push, gp[1] = g_pop, gp[2] = g_noop;
    for (idx j = 0; j < m; j++) gv[j] = push * g[j];
    /* dL/dold[k]: old[k] feeds new[k] (noop), new[k-1] (pop), new[k+1] (push); rows of
     * g past its end weigh 0 on a stand-in row (g's first) */
    for (idx k = 0; k < h; k++) {
        const real *same = k < H ? g + k * m : g, *next = k + 1 < H ? g + (k + 1) * m : g;
        const real *prev = k >= 1 && k - 1 < H ? g + (k - 1) * m : g;
        real w_same = k < H ? noop : 0, w_prev = k >= 1 && k - 1 < H ? pop : 0;
        real w_next = k + 1 < H ? push : 0;
        real *row = g_old + k * m;
        for (idx j = 0; j < m; j++) row[j] = w_same * same[j] + w_prev * prev[j] + w_next * next[j];
    }
}

/* The adjoint of sup_forward: g_readings (B, n, m) = dL/dr_t -> g_probs (B, n, 3) =
 * dL/dp_t (with respect to the probabilities themselves) and g_pushed (B, n, m). */
void sup_backward(idx B, idx n, idx m, const real *restrict probs, const real *restrict pushed,
                  const real *restrict stacks, const real *restrict g_readings,
                  real *restrict g_probs, real *restrict g_pushed, real *restrict work)
{
    idx S = sup_stored_rows(n), H_max = (n + 1) / 2 + 1;
    for (idx b = 0; b < B; b++) {
        const real *P = probs + b * n * 3, *V = pushed + b * n * m;
        const real *end = stacks + (b + 1) * S * m; /* V_{t-1} ends where V_t begins */
        const real *gr = g_readings + b * n * m;
        real *gP = g_probs + b * n * 3, *gV = g_pushed + b * n * m;
        real *g = work, *g_old = work + H_max * m; /* dL/dV_t, dL/dV_{t-1} */
        memset(g, 0, (size_t)m * sizeof(real));    /* V_n: read only */
        for (idx t = n; t >= 1; t--) {
            idx H = height(t, n), h = t > 1 ? height(t - 1, n) : 0;
            const real *old = end - h * m;
            for (idx j = 0; j < m; j++) g[j] += gr[(t - 1) * m + j];
            adjoint(m, h, H, old, P + (t - 1) * 3, V + (t - 1) * m, g, g_old, gP + (t - 1) * 3,
                    gV + (t - 1) * m);
            real *swap = g;
            g = g_old, g_old = swap, end = old;
        }
    }
}

/* One update of every example: old (B, h, m), probs (B, 3), pushed (B, m) -> new
 * (B, H, m), and its top new[:, 0] into reading (rows ldr). */
void sup_step_forward(idx B, idx m, idx h, idx H, const real *restrict old,
                      const real *restrict probs, const real *restrict pushed, real *restrict new_,
                      real *restrict reading, idx ldr)
{
    for (idx b = 0; b < B; b++) {
        real *N = new_ + b * H * m;
        update(m, h, H, old + b * h * m, probs + b * 3, pushed + b * m, N);
        memcpy(reading + b * ldr, N, (size_t)m * sizeof(real));
    }
}

/* The adjoint of sup_step_forward. g (B, H, m) = dL/dnew, to whose top dL/dreading =
 * g_a (rows lda; NULL: none) + g_b (contiguous) is added in place -> g_old (B, h, m),
 * g_probs (rows ldp, 3 each) and g_pushed (rows ldv, m each). */
void sup_step_backward(idx B, idx m, idx h, idx H, const real *restrict old,
                       const real *restrict probs, const real *restrict pushed, real *restrict g,
                       const real *restrict g_a, idx lda, const real *restrict g_b,
                       real *restrict g_old, real *restrict g_probs, idx ldp,
                       real *restrict g_pushed, idx ldv)
{
    for (idx b = 0; b < B; b++) {
        real *G = g + b * H * m;
        for (idx j = 0; j < m; j++) G[j] += (g_a ? g_a[b * lda + j] : 0) + g_b[b * m + j];
        adjoint(m, h, H, old + b * h * m, probs + b * 3, pushed + b * m, G, g_old + b * h * m,
                g_probs + b * ldp, g_pushed + b * ldv);
    }
}
