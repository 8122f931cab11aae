/* Dropout on a counter-based random stream (splitmix64), so that the backward pass
 * replays the forward's mask from its seed instead of storing it.
 *
 * Draw j (j = 0, 1, ...) is mix(seed + (j + 1) * golden), 64 bits. Element j < h takes
 * the low 32 bits of draw j, element h + j (j < n/2) the high 32 bits, where
 * h = ceil(n / 2); an element is kept iff its 32 bits are >= threshold (an unsigned
 * integer, threshold = round(p 2^32)), and a kept element is multiplied by scale. The
 * PyTorch reference in dropout.py computes the same bits. */
#include <stddef.h>
#include <stdint.h>

static inline uint64_t mix(uint64_t z) { /* splitmix64's finaliser */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dropout_apply(const REAL *restrict x, REAL *restrict y, int64_t n, uint64_t seed,
                   uint32_t threshold, double scale_) {
    const REAL scale = (REAL)scale_;
    const uint64_t golden = 0x9E3779B97F4A7C15ull;
    const int64_t h = (n + 1) / 2, m = n / 2;
    for (int64_t j = 0; j < m; j++) {
        const uint64_t z = mix(seed + (uint64_t)(j + 1) * golden);
        const uint32_t low = (uint32_t)z, high = (uint32_t)(z >> 32);
        y[j] = x[j] * (low >= threshold ? scale : (REAL)0);
        y[h + j] = x[h + j] * (high >= threshold ? scale : (REAL)0);
    }
    if (n % 2) { /* the middle element: the low half of draw m */
        const uint64_t z = mix(seed + (uint64_t)(m + 1) * golden);
        y[m] = x[m] * ((uint32_t)z >= threshold ? scale : (REAL)0);
    }
}
