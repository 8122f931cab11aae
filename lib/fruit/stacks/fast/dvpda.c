/* The dVPDA's dynamic program (docs/paper.md §6) on the CPU: one update of one example,
 * forward and its adjoint, and drivers over a batch (one update, or a whole sequence).
 *
 * The mathematics, the names and the scaling are those of fruit.stacks.fast.dvpda_math
 * and fruit.stacks.fast.dvpda_scan (PyTorch operations; read their docstrings first):
 * the forward weights alpha, eta with log scales psi, chi; the table G of scaled inner
 * weights gamma (`table` here) with per-column log scales phi; H = gamma' (the pop
 * helper); push P, replace R, pop O; the adjoints g_* and the deferred adjoint of gamma
 * (GU, HR) of dvpda_scan._GammaAdjoint.
 * fruit.stacks.fast.dvpda_native calls these functions; the tests hold them to the
 * PyTorch operations and to the paper-notation reference (fruit.stacks.reference) in
 * float64 and float32. fruit.kernels.build compiles this file twice, with
 * REAL = float and REAL = double.
 *
 * Layout (one example). X = Q S configurations a = (q, x), flattened q S + x. A row
 * rho = i X + a is a start time i and configuration a; column k (1 <= k < n) of the
 * table holds G[i -> k][a -> (u, y)] for its rows rho < k X. Rows are cut into blocks of
 * RB (a few SIMD vectors); column k has nb(k) = ceil(k X / RB) blocks, zero beyond k X.
 * A tile is one block of one column for one symbol y: Q vectors (u) of RB rows. The
 * tiles of block beta and symbol y, for all the columns that have that block
 * (k = kmin(beta) .. n-1), lie one after the other (a panel):
 *
 *     tile(beta, y, k) = table + block_start[beta] + (y count(beta) + k - kmin(beta)) TILE
 *
 * with count(beta) = n - kmin(beta) and TILE = Q RB. The O(n^3) work is then a stream
 * through panels: the pop contraction of update t, for block beta,
 *
 *     U[t][beta, y][r] += sum_{k = kmin(beta)}^{t-2} sum_u tile(beta, y, k)[u] H[k X + (u, y), r]
 *
 * (`panel_product`, a small matrix product with Q accumulators of RB rows in registers),
 * and its adjoints: the deferred adjoint of the table (the same product over the panel of
 * GU) and gH = G^T gU (`gh_panel`). A whole sequence is computed one example at a time
 * (`nd_forward_sequence`, `nd_backward_sequence`), so that its table stays in the cache.
 *
 * H of update t (gamma'[k -> t] for k < t-1, over the rows of column t-1) is kept in the
 * same blocks: Hc[beta][r][RB], H[rho, r] = Hc[(rho / RB) TILE + r RB + rho % RB], and
 * so is its adjoint gH; the O(t) terms use them row-major (Hrow, gHrow). HR keeps, for each column k, the H of the later updates t' that
 * pop it, HR[k][y][t'][r][u] = H[t'][k X + (u, y), r] (t' = k+2 .. n-1): the coefficients
 * of the deferred adjoint of column k, contiguous. GU, the adjoints of the columns, is
 * laid out like the table.
 *
 * Compiled with -ffast-math: no infinities or NaNs may arise. Inputs arrive as
 * weights = exp(logits - shift) and vector = exp(pushed_log - vector_shift) (finite, at
 * most 1), computed by PyTorch; every exp and log here has a finite argument.
 */
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

typedef REAL real;
typedef ptrdiff_t idx;

#define TINY ((real)(sizeof(real) == sizeof(float) ? FLT_MIN : DBL_MIN))

/* ---- vectors ----------------------------------------------------------------------- */

#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else /* SSE2, NEON, or a compiler without -march=native */
#define VBYTES 16
#endif
#define VL ((idx)(VBYTES / sizeof(real))) /* lanes */
#define NV 3                              /* vectors per row block */
#define RB (NV * VL)                      /* rows per block */
#define QB 3                              /* output vectors per pass of panel_product */

typedef real vec __attribute__((vector_size(VBYTES)));

static inline vec vload(const real *p)
{
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(real *p, vec v) { memcpy(p, &v, sizeof v); }

static inline vec vzero(void) { return (vec){0}; }

/* Keep v in a register: GCC would otherwise fold the load into each of its FMAs and
 * load the same vector once per product (a load-bound loop). */
#if (defined(__GNUC__) || defined(__clang__)) && VBYTES == 64 && defined(__AVX512F__)
#define IN_REGISTER(v) __asm__("" : "+v"(v))
#elif (defined(__GNUC__) || defined(__clang__)) && VBYTES == 32 && defined(__AVX__)
#define IN_REGISTER(v) __asm__("" : "+x"(v))
#else
#define IN_REGISTER(v) ((void)0)
#endif

static inline real hsum(vec v)
{
    real s = 0;
    for (idx l = 0; l < VL; l++) s += v[l];
    return s;
}

static inline real maxr(real a, real b) { return a > b ? a : b; }

static inline idx nb(idx k, idx X) { return k > 0 ? (k * X + RB - 1) / RB : 0; }

/* The updates t' = k+2 .. n-1 whose pops read column k (k >= 1). */
static inline idx hr_count(idx k, idx n) { return k >= 1 && n - k - 2 > 0 ? n - k - 2 : 0; }

/* ---- layout ------------------------------------------------------------------------ */

typedef struct {
    idx Q, S, X, m, A, n; /* n: capacity in updates (columns 1 .. n-1) */
    idx TILE, NB;         /* Q RB; blocks of column n-1 */
    idx *kmin;            /* (NB): first column of block beta */
    idx *block_start;     /* (NB + 1): offset of block beta's panels in a table */
    idx *hr_start;        /* (n + 1): offset of HR's part for column k in an example's HR */
} Dims;

static inline real *tile(const Dims *d, real *table, idx beta, idx y, idx k)
{
    const idx k0 = d->kmin[beta];
    return table + d->block_start[beta] + (y * (d->n - k0) + k - k0) * d->TILE;
}

static int layout(Dims *d, idx Q, idx S, idx m, idx n)
{
    const idx X = Q * S;
    *d = (Dims){.Q = Q, .S = S, .X = X, .m = m, .A = X * (2 * X + Q), .n = n, .TILE = Q * RB};
    d->NB = n >= 2 ? nb(n - 1, X) : 0;
    d->kmin = malloc((size_t)(d->NB + 1) * sizeof(idx));
    d->block_start = malloc((size_t)(d->NB + 1) * sizeof(idx));
    d->hr_start = malloc((size_t)(n + 2) * sizeof(idx));
    if (!d->kmin || !d->block_start || !d->hr_start) return -1;
    d->block_start[0] = 0;
    for (idx beta = 0; beta < d->NB; beta++) {
        d->kmin[beta] = beta * RB / X + 1;
        d->block_start[beta + 1] = d->block_start[beta] + S * (n - d->kmin[beta]) * d->TILE;
    }
    d->hr_start[0] = 0;
    for (idx k = 0; k <= n; k++) d->hr_start[k + 1] = d->hr_start[k] + S * hr_count(k, n) * Q * Q;
    return 0;
}

static void free_layout(Dims *d)
{
    free(d->kmin);
    free(d->block_start);
    free(d->hr_start);
}

/* ---- kernels ------------------------------------------------------------------------- */

typedef struct { /* J vectors of RB rows at v + j RB, with coefficients coef[j Q + r] */
    const real *v;
    idx J;
    const real *coef;
} Segment;

/* out[r][0..RB) (= or +=) sum over the segments of sum_j v_j coef[j Q + r], r < Q;
 * out row r at out + r RB (a tile). */
static inline __attribute__((always_inline)) void
panel_q(idx Q, idx nseg, const Segment *seg, real *out, int add)
{
    for (idx r0 = 0; r0 < Q; r0 += QB) {
        const idx nq = Q - r0 < QB ? Q - r0 : QB;
        vec acc[QB][NV];
        for (idx r = 0; r < QB; r++)
            for (idx v = 0; v < NV; v++) acc[r][v] = vzero();
        for (idx s = 0; s < nseg; s++) {
            const real *x = seg[s].v, *c = seg[s].coef + r0;
            for (idx j = 0; j < seg[s].J; j++, x += RB, c += Q) {
                vec h[QB]; /* each input vector is loaded once, for its nq products */
                for (idx r = 0; r < nq; r++) h[r] = vzero() + c[r];
                for (idx v = 0; v < NV; v++) {
                    vec g = vload(x + v * VL);
                    IN_REGISTER(g);
                    for (idx r = 0; r < nq; r++) acc[r][v] += g * h[r];
                }
            }
        }
        for (idx r = 0; r < nq; r++)
            for (idx v = 0; v < NV; v++) {
                real *o = out + (r0 + r) * RB + v * VL;
                vstore(o, add ? vload(o) + acc[r][v] : acc[r][v]);
            }
    }
}

static void panel_product(idx Q, idx nseg, const Segment *seg, real *out, int add)
{
    if (Q == 3) /* the models' Q: accumulators in registers */
        panel_q(3, nseg, seg, out, add);
    else
        panel_q(Q, nseg, seg, out, add);
}

/* gH = G^T gU over one panel (block beta, symbol y): for its nk tiles g_k (columns
 * k0 .. k0 + nk - 1) and the tile d of gU[t] in the same block,
 * part[k][u][r] (VL lanes) += g_k[u] * d[r], summed over the rows but not the lanes. */
static void gh_panel(idx Q, const real *g, idx nk, const real *d, real *part)
{
    if (Q == 3) {
        vec dv[3][NV];
        for (idx r = 0; r < 3; r++)
            for (idx v = 0; v < NV; v++) {
                dv[r][v] = vload(d + r * RB + v * VL);
                IN_REGISTER(dv[r][v]);
            }
        for (idx k = 0; k < nk; k++, g += 3 * RB, part += 9 * VL)
            for (idx u = 0; u < 3; u++) {
                vec gv[NV];
                for (idx v = 0; v < NV; v++) {
                    gv[v] = vload(g + u * RB + v * VL);
                    IN_REGISTER(gv[v]);
                }
                for (idx r = 0; r < 3; r++) {
                    vec p = vload(part + (u * 3 + r) * VL);
                    for (idx v = 0; v < NV; v++) p += gv[v] * dv[r][v];
                    vstore(part + (u * 3 + r) * VL, p);
                }
            }
        return;
    }
    for (idx k = 0; k < nk; k++, g += Q * RB, part += Q * Q * VL)
        for (idx u = 0; u < Q; u++)
            for (idx r = 0; r < Q; r++) {
                real s = 0;
                for (idx l = 0; l < RB; l++) s += g[u * RB + l] * d[r * RB + l];
                part[(u * Q + r) * VL] += s;
            }
}

/* out[i Q + j] += sum over the nblocks blocks b of sum over their RB rows of x_b[i] e_b[j]
 * (i, j < Q; x_b[i] the vector of RB rows at xs[b] + i RB, e_b[j] at es[b] + j RB): the
 * small products G^T gU of the backward pass, summed over row blocks with the Q x Q
 * accumulators in registers. */
static void block_dots(idx Q, idx nblocks, const real *const *xs, const real *const *es,
                       real *out)
{
    if (Q == 3) {
        vec acc[3][3];
        for (idx i = 0; i < 3; i++)
            for (idx j = 0; j < 3; j++) acc[i][j] = vzero();
        for (idx b = 0; b < nblocks; b++)
            for (idx v = 0; v < NV; v++) {
                vec xv[3], ev[3];
                for (idx i = 0; i < 3; i++) xv[i] = vload(xs[b] + i * RB + v * VL);
                for (idx j = 0; j < 3; j++) ev[j] = vload(es[b] + j * RB + v * VL);
                for (idx i = 0; i < 3; i++)
                    for (idx j = 0; j < 3; j++) acc[i][j] += xv[i] * ev[j];
            }
        for (idx i = 0; i < 3; i++)
            for (idx j = 0; j < 3; j++) out[i * 3 + j] += hsum(acc[i][j]);
        return;
    }
    for (idx i = 0; i < Q; i++)
        for (idx j = 0; j < Q; j++) {
            real sum = 0;
            for (idx b = 0; b < nblocks; b++)
                for (idx l = 0; l < RB; l++) sum += xs[b][i * RB + l] * es[b][j * RB + l];
            out[i * Q + j] += sum;
        }
}

/* ---- one example ----------------------------------------------------------------------- */

typedef struct { /* one example's buffers (entry k of alpha at alpha + k X, ...): table =
                  * gamma, the scaled inner weights; alpha, eta = the scaled forward weights */
    real *table, *alpha, *eta, *psi, *chi, *phi, *col_scale, *n_alpha, *n_eta;
} State;

typedef struct { /* one example's adjoint */
    real *g_alpha, *g_eta, *GU, *HR;
} Adjoint;

typedef struct { /* one update's inputs */
    const real *weights; /* (A) exp(logits - shift) */
    const real *vector;  /* (m) exp(pushed_log - vector_shift) */
    real shift, vector_shift;
} Inputs;

typedef struct { /* workspace of one call, sized for the capacity */
    real *Hc, *gH;          /* NB TILE each */
    real *Hrow, *gHrow;     /* (n X + RB) Q each: H and gH row-major, [rho][r] */
    real *part;             /* n Q Q VL: gh_panel's partial sums */
    const real **xs, **es;  /* NB + 1 tile pointers each, for block_dots */
    real *dots;             /* Q Q: block_dots' output */
    real *w, *w_eta;        /* n + 1 */
    real *coefH;            /* n Q Q */
    real *coefR, *coefO;    /* S Q Q each */
    real *coefRT;           /* S S Q Q */
    real *small;            /* per-update vectors and matrices */
    Segment *seg;           /* S + 2 */
} Scratch;

/* H tiles of update t (t >= 2): H[rho, r] = sum_{(s, z)} G[k -> t-1][(u, y) -> (s, z)] O_t[(s, z), r]
 * for rho = k X + (u, y) < (t-1) X; Hc[beta] for beta < nb(t-1). */
static void h_tiles(const Dims *d, real *table, idx t, const real *O, idx W2, real *Hc, Scratch *sc)
{
    const idx Q = d->Q, S = d->S, X = d->X;
    for (idx z = 0; z < S; z++)
        for (idx s = 0; s < Q; s++)
            for (idx r = 0; r < Q; r++) sc->coefO[(z * Q + s) * Q + r] = O[(s * S + z) * W2 + r];
    for (idx beta = 0; beta < nb(t - 1, X); beta++) {
        for (idx z = 0; z < S; z++)
            sc->seg[z] = (Segment){tile(d, table, beta, z, t - 1), Q, sc->coefO + z * Q * Q};
        panel_product(Q, S, sc->seg, Hc + beta * d->TILE, 0);
        for (idx l = 0; l < RB && beta * RB + l < (t - 1) * X; l++) /* and row-major */
            for (idx r = 0; r < Q; r++) sc->Hrow[(beta * RB + l) * Q + r] = Hc[beta * d->TILE + r * RB + l];
    }
}

/* w[k] = exp(psi[k] - phi[k] - D), w_eta[k] = exp(chi[k] - phi[k] - D_eta), k < t; returns
 * w_push and writes D, D_eta (the constants of forward_terms). */
static real weights_of(const State *st, idx t, real vector_shift, real *w, real *w_eta, real *D,
                       real *D_eta)
{
    const real *psi = st->psi, *chi = st->chi, *phi = st->phi;
    real Da = psi[0] - phi[0];
    for (idx k = 1; k < t; k++) Da = maxr(Da, psi[k] - phi[k]);
    for (idx k = 0; k < t; k++) w[k] = exp(psi[k] - phi[k] - Da);
    const real e_push = psi[t - 1] - phi[t - 1] + vector_shift;
    real De = e_push;
    for (idx k = 0; k < t; k++) De = maxr(De, chi[k] - phi[k]);
    for (idx k = 0; k < t; k++) w_eta[k] = exp(chi[k] - phi[k] - De);
    *D = Da, *D_eta = De;
    return exp(e_push - De);
}

/* Update t (1 <= t <= n) of one example: alpha[t], eta[t] and their scales, the reading
 * (X m), and column t of the table when write_column (t < n). */
static void forward_one(const Dims *d, const State *st, idx t, int write_column,
                        const Inputs *in, real *reading, Scratch *sc)
{
    const idx Q = d->Q, S = d->S, X = d->X, m = d->m, W2 = 2 * X + Q, TILE = d->TILE;
    const real *P = in->weights, *R = in->weights + X, *O = in->weights + 2 * X; /* row stride W2 */
    const real *alpha = st->alpha, *eta = st->eta, *phi = st->phi;
    if (t >= 2) h_tiles(d, st->table, t, O, W2, sc->Hc, sc);

    real D, D_eta, *w = sc->w, *w_eta = sc->w_eta;
    const real w_push = weights_of(st, t, in->vector_shift, w, w_eta, &D, &D_eta);
    real *pushed_a = sc->small, *U_alpha = pushed_a + X, *U_eta = U_alpha + X; /* X, X, X m */
    const real *a_prev = alpha + (t - 1) * X, *e_prev = eta + (t - 1) * X * m;
    for (idx b = 0; b < X; b++) { /* U = w[t-1] A[t-1] P + wA[t-1] R; V = w_push (A P) v + R^T wE */
        real p = 0, q = 0;
        for (idx a = 0; a < X; a++) {
            p += a_prev[a] * P[a * W2 + b];
            q += w[t - 1] * a_prev[a] * R[a * W2 + b];
        }
        pushed_a[b] = p;
        U_alpha[b] = w[t - 1] * p + q;
        for (idx c = 0; c < m; c++) {
            real e = 0;
            for (idx a = 0; a < X; a++) e += R[a * W2 + b] * (w_eta[t - 1] * e_prev[a * m + c]);
            U_eta[b * m + c] = w_push * p * in->vector[c] + e;
        }
    }
    /* pop terms: sum_{k <= t-2, u} (w alpha)[k][(u, y)] H[k X + (u, y), r] -> (r, y),
     * and the same with (w_eta eta)[k] */
    const real *Hrow = sc->Hrow;
    real *acc = U_eta + X * m; /* X (1 + m): pop terms of alpha and eta, [(r, y)][1 + m] */
    memset(acc, 0, (size_t)(X * (1 + m)) * sizeof(real));
    for (idx k = 0; k + 2 <= t; k++)
        for (idx a = 0; a < X; a++) {
            const idx y = a % S;
            const real wa = w[k] * alpha[k * X + a], *h = Hrow + (k * X + a) * Q;
            const real *ek = eta + (k * X + a) * m;
            for (idx r = 0; r < Q; r++) {
                real *o = acc + (r * S + y) * (1 + m);
                const real he = w_eta[k] * h[r];
                o[0] += wa * h[r];
                for (idx c = 0; c < m; c++) o[1 + c] += he * ek[c];
            }
        }
    for (idx b = 0; b < X; b++) {
        U_alpha[b] += acc[b * (1 + m)];
        for (idx c = 0; c < m; c++) U_eta[b * m + c] += acc[b * (1 + m) + 1 + c];
    }
    real n_alpha = 0, n_eta = 0, total = 0;
    for (idx b = 0; b < X; b++) n_alpha = maxr(n_alpha, U_alpha[b]);
    for (idx b = 0; b < X * m; b++) n_eta = maxr(n_eta, U_eta[b]);
    n_alpha = maxr(n_alpha, TINY);
    n_eta = maxr(n_eta, TINY);
    real *a_t = st->alpha + t * X, *e_t = st->eta + t * X * m;
    for (idx b = 0; b < X; b++) total += (a_t[b] = U_alpha[b] / n_alpha);
    for (idx b = 0; b < X * m; b++) e_t[b] = U_eta[b] / n_eta;
    const real base = in->shift + phi[t - 1];
    st->psi[t] = base + D + log(n_alpha);
    st->chi[t] = base + D_eta + log(n_eta);
    st->n_alpha[t] = n_alpha;
    st->n_eta[t] = n_eta;
    const real scale = exp(st->chi[t] - st->psi[t]) / maxr(total, TINY);
    for (idx b = 0; b < X * m; b++) reading[b] = scale * e_t[b];

    if (!write_column) return;
    /* column t: rows i < t-1 replace (G[i->t-1] R) + pop (sum_k G[i->k] H[k]); row t-1 push */
    const idx rows = (t - 1) * X;
    for (idx y = 0; y < S; y++) {
        for (idx z = 0; z < S; z++)
            for (idx s = 0; s < Q; s++)
                for (idx r = 0; r < Q; r++)
                    sc->coefR[(z * Q + s) * Q + r] = R[(s * S + z) * W2 + r * S + y];
        for (idx k = 1; k + 2 <= t; k++)
            for (idx u = 0; u < Q; u++)
                for (idx r = 0; r < Q; r++)
                    sc->coefH[((k - 1) * Q + u) * Q + r] = Hrow[(k * X + u * S + y) * Q + r];
        for (idx beta = 0; beta < nb(t, X); beta++) {
            idx ns = 0;
            if (beta < nb(t - 1, X))
                for (idx z = 0; z < S; z++)
                    sc->seg[ns++] = (Segment){tile(d, st->table, beta, z, t - 1), Q, sc->coefR + z * Q * Q};
            const idx k0 = d->kmin[beta];
            if (k0 <= t - 2)
                sc->seg[ns++] = (Segment){tile(d, st->table, beta, y, k0), (t - 1 - k0) * Q,
                                          sc->coefH + (k0 - 1) * Q * Q};
            panel_product(Q, ns, sc->seg, tile(d, st->table, beta, y, t), 0);
        }
        for (idx a = 0; a < X; a++) {
            const idx rho = rows + a;
            real *o = tile(d, st->table, rho / RB, y, t) + rho % RB;
            for (idx r = 0; r < Q; r++) o[r * RB] += P[a * W2 + r * S + y];
        }
    }
    real c = 0;
    for (idx beta = 0; beta < nb(t, X); beta++)
        for (idx y = 0; y < S; y++) {
            const real *v = tile(d, st->table, beta, y, t);
            for (idx l = 0; l < TILE; l++) c = maxr(c, v[l]);
        }
    c = maxr(c, TINY);
    for (idx beta = 0; beta < nb(t, X); beta++)
        for (idx y = 0; y < S; y++) {
            real *v = tile(d, st->table, beta, y, t);
            for (idx l = 0; l < TILE; l++) v[l] /= c;
        }
    st->col_scale[t] = c;
    st->phi[t] = phi[t - 1] + in->shift + log(c);
}

/* Adjoint of update t of one example, given g_reading (X m, or NULL) and the adjoints
 * from updates > t: adds into g_alpha, g_eta, assigns GU's column t-1 and writes g_logits
 * (A) and g_pushed (m). column_adjoint: column t was written and is read by a later
 * update of this pass (t < top); top: the updates of this backward pass. */
static void backward_one(const Dims *d, const State *st, const Adjoint *g, idx t, idx top,
                         int column_adjoint, const Inputs *in, const real *g_reading,
                         real *g_logits, real *g_pushed, Scratch *sc)
{
    const idx Q = d->Q, S = d->S, X = d->X, m = d->m, W2 = 2 * X + Q, TILE = d->TILE;
    const real *P = in->weights, *R = in->weights + X, *O = in->weights + 2 * X;
    const real *alpha = st->alpha, *eta = st->eta, *psi = st->psi, *chi = st->chi;
    real *g_alpha = g->g_alpha, *g_eta = g->g_eta, *table = st->table, *GU = g->GU;
    const idx rows = (t - 1) * X, nb1 = nb(t - 1, X);

    if (g_reading) { /* reading r = s E[t] with s = exp(chi - psi) / sum A[t] */
        const real *a_t = alpha + t * X, *e_t = eta + t * X * m;
        real total = 0, dot = 0;
        for (idx b = 0; b < X; b++) total += a_t[b];
        total = maxr(total, TINY);
        const real s = exp(chi[t] - psi[t]) / total;
        for (idx b = 0; b < X * m; b++) {
            g_eta[t * X * m + b] += s * g_reading[b];
            dot += g_reading[b] * e_t[b];
        }
        for (idx b = 0; b < X; b++) g_alpha[t * X + b] -= (s / total) * dot;
    }
    const real *Hrow = sc->Hrow;
    real *gH = sc->gH, *gHrow = sc->gHrow; /* gH row-major while it is summed, then in tiles */
    if (t >= 2) {
        h_tiles(d, table, t, O, W2, sc->Hc, sc);
        if (t < d->n) /* HR[k][y][t][r][u] = H[k X + (u, y), r]: the deferred adjoint of column k */
            for (idx k = 1; k + 2 <= t; k++)
                for (idx y = 0; y < S; y++) {
                    real *hr = g->HR + d->hr_start[k] + (y * hr_count(k, d->n) + t - k - 2) * Q * Q;
                    for (idx r = 0; r < Q; r++)
                        for (idx u = 0; u < Q; u++) hr[r * Q + u] = Hrow[(k * X + u * S + y) * Q + r];
                }
        memset(gHrow, 0, (size_t)(rows * Q) * sizeof(real));
    }
    real D, D_eta, *w = sc->w, *w_eta = sc->w_eta; /* the constants of the forward pass */
    const real w_push = weights_of(st, t, in->vector_shift, w, w_eta, &D, &D_eta);

    real *gP = sc->small, *gR = gP + X * X, *gO = gR + X * X, *g_v = gO + X * Q;
    real *pushed_a = g_v + m, *gU = pushed_a + X, *g_pushed_a = gU + X, *gV = g_pushed_a + X;
    const real *a_prev = alpha + (t - 1) * X, *e_prev = eta + (t - 1) * X * m;
    memset(gO, 0, (size_t)(X * Q) * sizeof(real));
    for (idx b = 0; b < X; b++) {
        real p = 0;
        for (idx a = 0; a < X; a++) p += a_prev[a] * P[a * W2 + b];
        pushed_a[b] = p;
        gU[b] = g_alpha[t * X + b] / st->n_alpha[t];
        for (idx c = 0; c < m; c++) gV[b * m + c] = g_eta[(t * X + b) * m + c] / st->n_eta[t];
    }
    /* alpha[t] = U / n,  U = w[t-1] A[t-1] P + wA[t-1] R + pop;
     * eta[t] = V / n_eta,  V = w_push (A[t-1] P) v + R^T wE[t-1] + pop */
    for (idx b = 0; b < X; b++) {
        real s = 0;
        for (idx c = 0; c < m; c++) s += gV[b * m + c] * in->vector[c];
        g_pushed_a[b] = w[t - 1] * gU[b] + w_push * s;
    }
    for (idx c = 0; c < m; c++) {
        real s = 0;
        for (idx b = 0; b < X; b++) s += pushed_a[b] * gV[b * m + c];
        g_v[c] = w_push * s;
    }
    for (idx a = 0; a < X; a++) {
        const real wa = w[t - 1] * a_prev[a];
        real ga = 0, gr = 0;
        for (idx b = 0; b < X; b++) {
            real s = wa * gU[b];
            for (idx c = 0; c < m; c++) s += w_eta[t - 1] * e_prev[a * m + c] * gV[b * m + c];
            gR[a * X + b] = s;
            gP[a * X + b] = a_prev[a] * g_pushed_a[b];
            ga += P[a * W2 + b] * g_pushed_a[b];
            gr += R[a * W2 + b] * gU[b];
        }
        g_alpha[(t - 1) * X + a] += ga + w[t - 1] * gr;
        for (idx c = 0; c < m; c++) {
            real s = 0;
            for (idx b = 0; b < X; b++) s += R[a * W2 + b] * gV[b * m + c];
            g_eta[((t - 1) * X + a) * m + c] += w_eta[t - 1] * s;
        }
    }
    /* pop terms, k <= t-2: gradients of wA[k], wE[k] and of H */
    for (idx k = 0; k + 2 <= t; k++)
        for (idx a = 0; a < X; a++) {
            const idx y = a % S, rho = k * X + a;
            const real wa = w[k] * alpha[rho], *h = Hrow + rho * Q;
            const real *ek = eta + rho * m;
            real *gek = g_eta + rho * m, *gh = gHrow + rho * Q;
            real g_wa = 0;
            for (idx r = 0; r < Q; r++) {
                const idx b = r * S + y;
                const real *gv = gV + b * m, he = w_eta[k] * h[r];
                real s = wa * gU[b], e = 0;
                g_wa += gU[b] * h[r];
                for (idx c = 0; c < m; c++) {
                    e += ek[c] * gv[c];
                    gek[c] += he * gv[c];
                }
                gh[r] += s + w_eta[k] * e;
            }
            g_alpha[rho] += w[k] * g_wa;
        }

    /* column t (written at update t, read by the pops of updates t+1 .. top-1) */
    if (column_adjoint) {
        const idx nbt = nb(t, X);
        if (t + 3 <= top) { /* deferred: sum_{t' = t+2}^{top-1} sum_r GU[t'][y, r] H[t'][t X + (u, y), r] */
            const idx J = (top - t - 2) * Q;
            for (idx y = 0; y < S; y++) {
                const real *coef = g->HR + d->hr_start[t] + y * hr_count(t, d->n) * Q * Q;
                for (idx beta = 0; beta < nbt; beta++) {
                    const Segment seg = {tile(d, GU, beta, y, t + 2), J, coef};
                    panel_product(Q, 1, &seg, tile(d, GU, beta, y, t), 1);
                }
            }
        }
        const real inv = 1 / st->col_scale[t]; /* gU of the unnormalised column; rows < t X */
        for (idx beta = 0; beta < nbt; beta++)
            for (idx y = 0; y < S; y++) {
                real *v = tile(d, GU, beta, y, t);
                for (idx r = 0; r < Q; r++)
                    for (idx l = 0; l < RB; l++) v[r * RB + l] = beta * RB + l < t * X ? v[r * RB + l] * inv : 0;
            }
        for (idx y = 0; y < S; y++) /* push row t-1 */
            for (idx a = 0; a < X; a++) {
                const idx rho = rows + a;
                const real *v = tile(d, GU, rho / RB, y, t) + rho % RB;
                for (idx r = 0; r < Q; r++) gP[a * X + r * S + y] += v[r * RB];
            }
        /* pop: U[i] += sum_k G[i->k] H[k]: gH[k X + (u, y), r] += sum_rho G[k][y, u] gU[t][y, r] */
        if (t >= 3)
            for (idx y = 0; y < S; y++) {
                real *part = sc->part; /* [k-1][u][r][VL] */
                memset(part, 0, (size_t)((t - 2) * Q * Q * VL) * sizeof(real));
                for (idx beta = 0; beta < nb(t - 2, X); beta++) { /* blocks that column t-2 has */
                    const idx k0 = d->kmin[beta];
                    gh_panel(Q, tile(d, table, beta, y, k0), t - 1 - k0, tile(d, GU, beta, y, t),
                             part + (k0 - 1) * Q * Q * VL);
                }
                for (idx k = 1; k + 2 <= t; k++)
                    for (idx u = 0; u < Q; u++) {
                        const idx rho = k * X + u * S + y;
                        for (idx r = 0; r < Q; r++)
                            gHrow[rho * Q + r] += hsum(vload(part + (((k - 1) * Q + u) * Q + r) * VL));
                    }
            }
        if (t >= 2) /* replace: U[i] += G[i->t-1] R: gR[(s, z), (r, y)] += sum_rho G[t-1][z, s] gU[t][y, r] */
            for (idx z = 0; z < S; z++)
                for (idx y = 0; y < S; y++) {
                    for (idx beta = 0; beta < nb1; beta++) {
                        sc->xs[beta] = tile(d, table, beta, z, t - 1);
                        sc->es[beta] = tile(d, GU, beta, y, t);
                    }
                    memset(sc->dots, 0, (size_t)(Q * Q) * sizeof(real));
                    block_dots(Q, nb1, sc->xs, sc->es, sc->dots);
                    for (idx s = 0; s < Q; s++)
                        for (idx r = 0; r < Q; r++) gR[(s * S + z) * X + r * S + y] += sc->dots[s * Q + r];
                }
    }
    if (t >= 2) {
        for (idx beta = 0; beta < nb1; beta++) /* gH in tiles, zero beyond row (t-1) X */
            for (idx r = 0; r < Q; r++)
                for (idx l = 0; l < RB; l++) {
                    const idx rho = beta * RB + l;
                    gH[beta * TILE + r * RB + l] = rho < rows ? gHrow[rho * Q + r] : 0;
                }
        /* H = G[. -> t-1] O: gO[(s, z), r] += sum_rho G[t-1][z, s][rho] gH[rho, r] */
        for (idx z = 0; z < S; z++) {
            for (idx beta = 0; beta < nb1; beta++) {
                sc->xs[beta] = tile(d, table, beta, z, t - 1);
                sc->es[beta] = gH + beta * TILE;
            }
            memset(sc->dots, 0, (size_t)(Q * Q) * sizeof(real));
            block_dots(Q, nb1, sc->xs, sc->es, sc->dots);
            for (idx s = 0; s < Q; s++)
                for (idx r = 0; r < Q; r++) gO[(s * S + z) * Q + r] += sc->dots[s * Q + r];
        }
        /* adjoint of column t-1 from this update (GU's column t-1 is assigned here):
         * GU[t-1][z, s] = sum_{(r, y)} gU[t][y, r] R[(s, z), (r, y)] + sum_r gH[., r] O[(s, z), r] */
        for (idx z = 0; z < S; z++)
            for (idx r = 0; r < Q; r++)
                for (idx s = 0; s < Q; s++) {
                    sc->coefO[(z * Q + r) * Q + s] = O[(s * S + z) * W2 + r];
                    for (idx y = 0; y < S; y++)
                        sc->coefRT[((z * S + y) * Q + r) * Q + s] = R[(s * S + z) * W2 + r * S + y];
                }
        for (idx z = 0; z < S; z++)
            for (idx beta = 0; beta < nb1; beta++) {
                idx ns = 0;
                if (column_adjoint)
                    for (idx y = 0; y < S; y++)
                        sc->seg[ns++] = (Segment){tile(d, GU, beta, y, t), Q, sc->coefRT + (z * S + y) * Q * Q};
                sc->seg[ns++] = (Segment){gH + beta * TILE, Q, sc->coefO + z * Q * Q};
                panel_product(Q, ns, sc->seg, tile(d, GU, beta, z, t - 1), 0);
            }
    }
    for (idx a = 0; a < X; a++) {
        const real *wa = in->weights + a * W2;
        real *ga = g_logits + a * W2;
        for (idx b = 0; b < X; b++) {
            ga[b] = gP[a * X + b] * wa[b];
            ga[X + b] = gR[a * X + b] * wa[X + b];
        }
        for (idx r = 0; r < Q; r++) ga[2 * X + r] = gO[a * Q + r] * wa[2 * X + r];
    }
    for (idx c = 0; c < m; c++) g_pushed[c] = g_v[c] * in->vector[c];
}

/* ---- batch drivers (called from fruit.stacks.fast.dvpda_native through ctypes) -------- */

typedef struct { /* contiguous (B, ...) arrays; n: capacity in updates */
    idx B, Q, S, m, n;
    real *table;                          /* gamma: (B, nd_table_size(Q, S, n)) */
    real *alpha, *eta;                    /* (B, n+1, X), (B, n+1, X, m) */
    real *psi, *chi, *phi, *col_scale, *n_alpha, *n_eta; /* (B, n+1) */
} nd_buffers;

typedef struct { /* adjoint of a backward pass over the buffers' capacity */
    idx top;               /* updates of this pass */
    real *g_alpha, *g_eta; /* like alpha, eta */
    real *GU;              /* like the table */
    real *HR;              /* (B, nd_hr_size(Q, S, n)) */
} nd_adjoint;

typedef struct { /* contiguous (B, T, ...) inputs: T = 1 for one update */
    idx T;
    const real *weights;      /* (B, T, A) */
    const real *vector;       /* (B, T, m) */
    const real *shift;        /* (B, T) */
    const real *vector_shift; /* (B, T) */
} nd_inputs;

idx nd_table_size(idx Q, idx S, idx n)
{
    const idx X = Q * S;
    idx size = 0;
    for (idx beta = 0; beta < (n >= 2 ? nb(n - 1, X) : 0); beta++) size += S * (n - (beta * RB / X + 1)) * Q * RB;
    return size;
}

idx nd_hr_size(idx Q, idx S, idx n)
{
    idx size = 0;
    for (idx k = 0; k <= n; k++) size += S * hr_count(k, n) * Q * Q;
    return size;
}

typedef struct {
    Dims d;
    Scratch sc;
    void *blocks[3];
} Context;

static void release(Context *cx)
{
    free_layout(&cx->d);
    for (int i = 0; i < 3; i++) free(cx->blocks[i]);
}

static int prepare(Context *cx, idx Q, idx S, idx m, idx n)
{
    memset(cx, 0, sizeof *cx);
    if (layout(&cx->d, Q, S, m, n)) {
        release(cx);
        return -1;
    }
    const idx X = Q * S, N = n > 1 ? n : 1, TILE = cx->d.TILE, NB = cx->d.NB;
    const idx sizes[] = {NB * TILE, NB * TILE, (N * X + RB) * Q, (N * X + RB) * Q,
                         N * Q * Q * VL, Q * Q, N + 1, N + 1,
                         N * Q * Q, S * Q * Q, S * Q * Q, S * S * Q * Q,
                         4 * X * X + 4 * X * m + 4 * X * Q + 4 * m + 64};
    idx total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) total += (sizes[i] + VL - 1) / VL * VL;
    real *reals = malloc((size_t)total * sizeof(real));
    Segment *seg = malloc((size_t)(S + 2) * sizeof(Segment));
    const real **ptrs = malloc((size_t)(2 * (NB + 1)) * sizeof(real *));
    cx->blocks[0] = reals, cx->blocks[1] = seg, cx->blocks[2] = (void *)ptrs;
    if (!reals || !seg || !ptrs) {
        release(cx);
        return -1;
    }
    real **slots[] = {&cx->sc.Hc, &cx->sc.gH, &cx->sc.Hrow, &cx->sc.gHrow, &cx->sc.part, &cx->sc.dots, &cx->sc.w, &cx->sc.w_eta,
                      &cx->sc.coefH, &cx->sc.coefR, &cx->sc.coefO, &cx->sc.coefRT,
                      &cx->sc.small};
    real *at = reals;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        *slots[i] = at;
        at += (sizes[i] + VL - 1) / VL * VL;
    }
    cx->sc.seg = seg;
    cx->sc.xs = ptrs, cx->sc.es = ptrs + NB + 1;
    return 0;
}

static State state_of(const nd_buffers *buf, idx b, idx table_size)
{
    const idx X = buf->Q * buf->S, E = buf->n + 1;
    return (State){
        .table = buf->table + b * table_size,
        .alpha = buf->alpha + b * E * X,
        .eta = buf->eta + b * E * X * buf->m,
        .psi = buf->psi + b * E,
        .chi = buf->chi + b * E,
        .phi = buf->phi + b * E,
        .col_scale = buf->col_scale + b * E,
        .n_alpha = buf->n_alpha + b * E,
        .n_eta = buf->n_eta + b * E,
    };
}

static Inputs inputs_of(const nd_inputs *in, idx A, idx m, idx b, idx t)
{
    const idx bt = b * in->T + t;
    return (Inputs){
        .weights = in->weights + bt * A,
        .vector = in->vector + bt * m,
        .shift = in->shift[bt],
        .vector_shift = in->vector_shift[bt],
    };
}

/* The step API visits the examples in alternating directions (serpentine: reversed for
 * odd t), and the adjoint of an update in the direction opposite to the update's, so
 * that each call starts with the examples whose tables the previous call touched last
 * (still in the cache when a batch's tables are larger than it). Examples are
 * independent: the order changes no number. */
static inline idx example(idx i, idx B, int reversed) { return reversed ? B - 1 - i : i; }

/* Update t (1 <= t <= n) of every example: readings (B, X m). */
int nd_forward_step(const nd_buffers *buf, idx t, int write_column, const nd_inputs *in,
                    real *reading)
{
    Context cx;
    if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;
    const idx size = cx.d.block_start[cx.d.NB], Xm = cx.d.X * buf->m;
    for (idx i = 0; i < buf->B; i++) {
        const idx b = example(i, buf->B, t % 2);
        State st = state_of(buf, b, size);
        Inputs x = inputs_of(in, cx.d.A, buf->m, b, 0);
        forward_one(&cx.d, &st, t, write_column, &x, reading + b * Xm, &cx.sc);
    }
    release(&cx);
    return 0;
}

/* Adjoint of update t of every example: g_logits (B, A), g_pushed (B, m). */
int nd_backward_step(const nd_buffers *buf, const nd_adjoint *adj, idx t, int column_adjoint,
                     const nd_inputs *in, const real *g_reading, real *g_logits, real *g_pushed)
{
    Context cx;
    if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;
    const idx X = cx.d.X, m = buf->m, E = buf->n + 1;
    const idx size = cx.d.block_start[cx.d.NB], hr = cx.d.hr_start[buf->n + 1];
    for (idx i = 0; i < buf->B; i++) {
        const idx b = example(i, buf->B, 1 - t % 2);
        State st = state_of(buf, b, size);
        Adjoint g = {adj->g_alpha + b * E * X, adj->g_eta + b * E * X * m, adj->GU + b * size,
                     adj->HR + b * hr};
        Inputs x = inputs_of(in, cx.d.A, m, b, 0);
        backward_one(&cx.d, &st, &g, t, adj->top, column_adjoint, &x,
                     g_reading ? g_reading + b * X * m : NULL, g_logits + b * cx.d.A,
                     g_pushed + b * m, &cx.sc);
    }
    release(&cx);
    return 0;
}

/* ---- one update of every example straight from a stack RNN's heads --------------------
 *
 * The fused Nd pass (fruit.models.passes.nd_pass) calls these instead of
 * nd_forward_step / nd_backward_step, so that a time step makes one C call each way
 * instead of a dozen small PyTorch operations around it. head: B rows (row stride
 * ld_head) of the heads' outputs in the controller's precision HEAD: A action logits,
 * then u, the pushed vector's pre-activation (v = sigma(u), pushed_log = log sigma(u)).
 * The forward prepares this update's inputs as exp_shifted does
 * (weights = exp(logits - shift), vector = exp(pushed_log - vector_shift), shifts the
 * row maxima), into the arrays of `in`, which the backward reads again; the logits must
 * be finite (a linear layer's). */

static inline real log_sigmoid(real u) { return (u < 0 ? u : 0) - log1p(exp(-fabs(u))); }

static inline real sigmoid_of_minus(real u) /* sigma(-u), without overflow */
{
    const real e = exp(-fabs(u));
    return u >= 0 ? e / (1 + e) : 1 / (1 + e);
}

#define HEAD_STEPS(HEAD, SUFFIX)                                                              \
    int nd_head_forward_step_##SUFFIX(const nd_buffers *buf, idx t, int write_column,        \
                                      const HEAD *head, idx ld_head, const nd_inputs *in,     \
                                      HEAD *reading, idx ld_reading)                          \
    {                                                                                         \
        Context cx;                                                                           \
        if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;                         \
        const idx size = cx.d.block_start[cx.d.NB], Xm = cx.d.X * buf->m, A = cx.d.A;       \
        const idx m = buf->m;                                                                 \
        real *r = malloc((size_t)Xm * sizeof(real));                                          \
        if (!r) {                                                                             \
            release(&cx);                                                                     \
            return -1;                                                                        \
        }                                                                                     \
        for (idx i = 0; i < buf->B; i++) { const idx b = example(i, buf->B, t % 2);           \
            const HEAD *h = head + b * ld_head;                                               \
            real *w = (real *)in->weights + b * A, *v = (real *)in->vector + b * m;           \
            real shift = h[0], vshift;                                                        \
            for (idx a = 1; a < A; a++) shift = maxr(shift, (real)h[a]);                      \
            for (idx a = 0; a < A; a++) w[a] = exp((real)h[a] - shift);                       \
            for (idx c = 0; c < m; c++) v[c] = log_sigmoid((real)h[A + c]);                   \
            vshift = v[0];                                                                    \
            for (idx c = 1; c < m; c++) vshift = maxr(vshift, v[c]);                          \
            for (idx c = 0; c < m; c++) v[c] = exp(v[c] - vshift);                            \
            ((real *)in->shift)[b] = shift, ((real *)in->vector_shift)[b] = vshift;           \
            State st = state_of(buf, b, size);                                                \
            Inputs x = inputs_of(in, A, m, b, 0);                                             \
            forward_one(&cx.d, &st, t, write_column, &x, r, &cx.sc);                          \
            for (idx l = 0; l < Xm; l++) reading[b * ld_reading + l] = (HEAD)r[l];            \
        }                                                                                     \
        free(r);                                                                              \
        release(&cx);                                                                         \
        return 0;                                                                             \
    }                                                                                         \
                                                                                              \
    /* dL/dreading = g_a (NULL: none) + g_b -> dhead (B rows of A + m): dL/dlogits, and      \
     * dL/du = dL/dpushed_log sigma(-u). */                                                   \
    int nd_head_backward_step_##SUFFIX(const nd_buffers *buf, const nd_adjoint *adj, idx t,  \
                                       int column_adjoint, const nd_inputs *in,               \
                                       const HEAD *head, idx ld_head, const HEAD *g_a,        \
                                       idx ld_a, const HEAD *g_b, idx ld_b, HEAD *dhead,      \
                                       idx ld_dhead)                                          \
    {                                                                                         \
        Context cx;                                                                           \
        if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;                         \
        const idx X = cx.d.X, m = buf->m, A = cx.d.A, E = buf->n + 1, Xm = X * m;           \
        const idx size = cx.d.block_start[cx.d.NB], hr = cx.d.hr_start[buf->n + 1];         \
        real *g = malloc((size_t)(Xm + A + m) * sizeof(real)), *g_logits = g + Xm;           \
        if (!g) {                                                                             \
            release(&cx);                                                                     \
            return -1;                                                                        \
        }                                                                                     \
        real *g_pushed = g_logits + A;                                                        \
        for (idx i = 0; i < buf->B; i++) { const idx b = example(i, buf->B, 1 - t % 2);       \
            for (idx l = 0; l < Xm; l++)                                                      \
                g[l] = (real)g_b[b * ld_b + l] + (g_a ? (real)g_a[b * ld_a + l] : 0);         \
            State st = state_of(buf, b, size);                                                \
            Adjoint ga = {adj->g_alpha + b * E * X, adj->g_eta + b * E * Xm,                   \
                          adj->GU + b * size, adj->HR + b * hr};                              \
            Inputs x = inputs_of(in, A, m, b, 0);                                             \
            backward_one(&cx.d, &st, &ga, t, adj->top, column_adjoint, &x, g, g_logits,       \
                         g_pushed, &cx.sc);                                                   \
            HEAD *dh = dhead + b * ld_dhead;                                                  \
            const HEAD *u = head + b * ld_head + A;                                           \
            for (idx a = 0; a < A; a++) dh[a] = (HEAD)g_logits[a];                            \
            for (idx c = 0; c < m; c++)                                                       \
                dh[A + c] = (HEAD)(g_pushed[c] * sigmoid_of_minus((real)u[c]));               \
        }                                                                                     \
        free(g);                                                                              \
        release(&cx);                                                                         \
        return 0;                                                                             \
    }

HEAD_STEPS(float, f32)
HEAD_STEPS(double, f64)

/* Updates 1..n of every example, one example at a time (its table stays in the cache);
 * column t is written for t < n. readings (B, n, X m). */
int nd_forward_sequence(const nd_buffers *buf, idx n, const nd_inputs *in, real *readings)
{
    Context cx;
    if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;
    const idx size = cx.d.block_start[cx.d.NB], Xm = cx.d.X * buf->m;
    for (idx b = 0; b < buf->B; b++) {
        State st = state_of(buf, b, size);
        for (idx t = 1; t <= n; t++) {
            Inputs x = inputs_of(in, cx.d.A, buf->m, b, t - 1);
            forward_one(&cx.d, &st, t, t < n, &x, readings + (b * n + t - 1) * Xm, &cx.sc);
        }
    }
    release(&cx);
    return 0;
}

/* The adjoint of nd_forward_sequence, one example at a time with one example's adjoint
 * buffers: g_logits (B, n, A), g_pushed (B, n, m), g_eta0 (B, m) = the adjoint of
 * eta[0] at (q0, bottom). */
int nd_backward_sequence(const nd_buffers *buf, idx n, const nd_inputs *in,
                         const real *g_readings, real *g_logits, real *g_pushed, real *g_eta0)
{
    Context cx;
    if (prepare(&cx, buf->Q, buf->S, buf->m, buf->n)) return -1;
    const idx X = cx.d.X, m = buf->m, A = cx.d.A, E = buf->n + 1;
    const idx size = cx.d.block_start[cx.d.NB], hr = cx.d.hr_start[buf->n + 1];
    real *work = calloc((size_t)(E * X + E * X * m + size + hr + 1), sizeof(real));
    if (!work) {
        release(&cx);
        return -1;
    }
    Adjoint g = {work, work + E * X, work + E * X + E * X * m, work + E * X + E * X * m + size};
    for (idx b = 0; b < buf->B; b++) {
        State st = state_of(buf, b, size);
        memset(work, 0, (size_t)(E * X + E * X * m) * sizeof(real));
        for (idx t = n; t >= 1; t--) {
            Inputs x = inputs_of(in, A, m, b, t - 1);
            backward_one(&cx.d, &st, &g, t, n, t < n, &x, g_readings + (b * n + t - 1) * X * m,
                         g_logits + (b * n + t - 1) * A, g_pushed + (b * n + t - 1) * m, &cx.sc);
        }
        memcpy(g_eta0 + b * m, g.g_eta, (size_t)m * sizeof(real));
    }
    free(work);
    release(&cx);
    return 0;
}

/* Copy columns 1 .. keep-1 of B tables of capacity n_src into tables of capacity n_dst
 * (keep <= min(n_src, n_dst)): the step API's growing buffers. */
int nd_copy_columns(idx B, idx Q, idx S, const real *src, idx n_src, real *dst, idx n_dst, idx keep)
{
    Dims a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    if (layout(&a, Q, S, 1, n_src) || layout(&b, Q, S, 1, n_dst)) {
        free_layout(&a), free_layout(&b);
        return -1;
    }
    const idx size_a = a.block_start[a.NB], size_b = b.block_start[b.NB];
    for (idx e = 0; e < B; e++)
        for (idx beta = 0; beta < nb(keep - 1, Q * S); beta++)
            for (idx y = 0; y < S; y++) {
                const idx k0 = a.kmin[beta];
                memcpy(tile(&b, dst + e * size_b, beta, y, k0), tile(&a, (real *)src + e * size_a, beta, y, k0),
                       (size_t)((keep - k0) * a.TILE) * sizeof(real));
            }
    free_layout(&a), free_layout(&b);
    return 0;
}
