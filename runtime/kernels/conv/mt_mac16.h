/*
 * mt_mac16.h - what the int16 (a16w8) MAC kernels share (docs/numerics.md section 6): x int16,
 * weights int8, an int64 bias within int48, 16-bit multipliers, an int16 y, zero points 0.
 *
 *   mt_mac16_ok      the per-channel operands (bias int64, mult in [0, 2^15), shift in [2, 62])
 *                    and the output stage's attributes (zero points 0, an int16 clamp range)
 *   mt_stage16       one call's output stage and its form, chosen once per call:
 *                    32-bit ("fast") when every channel's |bias| + 32768 * sum |w| <= 2^31 - 1
 *                    (every partial sum fits int32, in any order) and every shift is in
 *                    [17, 46]: int32 sums from the bias, rq by SMLAWB / VMULH + VRSHL;
 *                    else the exact 64-bit form: int32 sums over chunks of MT_MAC16_CHUNK
 *                    products added into int64, rq on 64 bits (mt_out16)
 *   mt_dot16_rows32  acc[r] += sum_k x[k] * w[r * ws + k] for up to four weight rows sharing x,
 *                    int32: MVE VMLADAVA.S16 four rows per x load (mt_mac16_mve.h); DSP SMLAD
 *                    with x repacked into (x0, x2), (x1, x3) pairs once for all rows, the
 *                    weights widened by SXTB16 (and ROR #8); C one product at a time
 *   mt_dot16_rows    the same into int64 accumulators, chunk by chunk
 *   mt_mac16_run     bias + one run of up to four channels, then y
 *
 * Every sum is exact: the program readers bound each channel's |bias| + sum |w| * 32768 below
 * 2^47 at load, the int32 sums are bounded as above, and 504 products of at most 2^22 fit
 * int32. The C path reads int16 and int8 elements one at a time (Armv6-M safe); DSP reads words
 * at any address (Armv7E-M / Armv8-M Mainline allow it).
 */
#ifndef MT_MAC16_H
#define MT_MAC16_H

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define MT_S16_MAX     32767
#define MT_S48_MAX     140737488355327LL /* 2^47 - 1: the int16 MAC accumulator (TOSA INT48) */
#define MT_MAC16_NR    4 /* weight rows per mt_dot16_rows call */
#define MT_MAC16_CHUNK 504 /* products summed in int32 from 0: 504 * 2^22 < 2^31 */

mt_status mt_conv2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_depthwise_conv2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_fully_connected_s16(const mt_op_args *args, int folded) MT_WEAK16;

/* bias (n,) int64, mult and shift (n,) int32 with 16-bit multipliers; out_zp 0 and an int16
 * clamp range: 1 when legal. */
static inline int mt_mac16_ok(const mt_tensor *bias, const mt_tensor *mult, const mt_tensor *shift,
                              uint32_t n, int32_t out_zp, int32_t lo, int32_t hi)
{
  if (!mt_tensor_ok(bias, MT_DTYPE_INT64, 1) || bias->rec->shape[0] != n || !mt_vec_ok(mult, n) ||
      !mt_vec_ok(shift, n) || out_zp != 0 || lo < -MT_S16_MAX || lo > hi || hi > MT_S16_MAX) {
    return 0;
  }
  const int32_t *m = (const int32_t *)mult->data, *s = (const int32_t *)shift->data;
  for (uint32_t o = 0; o < n; o++) {
    if (m[o] < 0 || m[o] > MT_S16_MAX || s[o] < MT_MIN_SHIFT || s[o] > MT_MAX_SHIFT) {
      return 0;
    }
  }
  return 1;
}

/* *y = clamp(rq(acc), lo, hi); 0 (nothing written) when acc leaves int48 or rq leaves int32,
 * which the program readers rule out at load: only a direct kernel call can meet it. */
static inline int mt_out16(int64_t acc, int32_t mult, int32_t shift, int32_t lo, int32_t hi,
                           int16_t *y)
{
  if (acc < -MT_S48_MAX || acc > MT_S48_MAX) {
    return 0;
  }
  const int64_t r = (acc * mult + ((int64_t)1 << (shift - 1))) >> shift; /* |.| < 2^62 */
  if (r < -0x7FFFFFFF - 1 || r > 0x7FFFFFFF) {
    return 0;
  }
  *y = (int16_t)(r < lo ? lo : (r > hi ? hi : r));
  return 1;
}

/* mt_out16 of n consecutive channels: acc[j] with mult[j], shift[j] into y[j]. */
static inline int mt_out16_n(const int64_t *acc, int32_t n, const int32_t *mult,
                             const int32_t *shift, int32_t lo, int32_t hi, int16_t *y)
{
  for (int32_t j = 0; j < n; j++) {
    if (!mt_out16(acc[j], mult[j], shift[j], lo, hi, y + j)) {
      return 0;
    }
  }
  return 1;
}

/* One call's output stage: the per-channel constants, the clamp and the form (above). */
typedef struct {
  const int64_t *bias;
  const int32_t *mult, *shift;
  int32_t lo, hi;
  int fast; /* the 32-bit form */
} mt_stage16;

#include "mt_mac16_dsp.h" /* mt_dot16_rows32_dsp */
#include "mt_mac16_mve.h" /* the VMLADAVA loops, sum |w|, the output stage on lanes */

/* Fill s for n_c channels of n_k products each (the operands passed mt_mac16_ok). The bound
 * sum |w| <= 128 * n_k first (no weight read); with `tight` (n_k contiguous weights per channel,
 * rows ws apart: one pass over the weights, for callers with several pixels) sum |w| itself. */
static inline void mt_stage16_init(mt_stage16 *s, const int64_t *bias, const int32_t *mult,
                                   const int32_t *shift, int32_t lo, int32_t hi, const int8_t *w,
                                   size_t ws, uint32_t n_c, uint32_t n_k, int tight)
{
  const int64_t top = 0x7FFFFFFF, any = (int64_t)n_k << 22; /* 32768 * 128 per product */
  const uint32_t room = any < top ? (uint32_t)(top - any) : 0; /* |bias| <= room: no weight read */
  int cheap = any < top;
  *s = (mt_stage16){bias, mult, shift, lo, hi, 0};
  for (uint32_t o = 0; o < n_c; o++) {
    const int32_t b = (int32_t)bias[o]; /* the low word: all of it when bias fits int32 */
    if ((uint32_t)(shift[o] - 17) > 46 - 17 || (int64_t)b != bias[o]) {
      return;
    }
    cheap &= (uint32_t)b + room <= 2 * room; /* -room <= b <= room, in unsigned arithmetic */
  }
  if (!cheap && !tight) {
    return;
  }
  for (uint32_t o = 0; !cheap && o < n_c; o++) {
    uint32_t sum = 0;
    const int8_t *wr = w + (size_t)o * ws;
#if MT_MVE
    sum = mt_wabs_mve(wr, n_k);
#else /* !MT_MVE */
    for (uint32_t k = 0; k < n_k; k++) {
      sum += (uint32_t)(wr[k] < 0 ? -wr[k] : wr[k]);
    }
#endif /* MT_MVE */
    if ((bias[o] < 0 ? -bias[o] : bias[o]) + 32768 * (int64_t)sum > top) {
      return;
    }
  }
  s->fast = 1;
}

/* rq(acc) for an int32 acc, 0 <= mult < 2^15, 17 <= shift <= 46, in 32-bit operations:
 * v = floor(acc * mult / 2^16) (SMLAWB, or its halves in C), then (v + 2^(shift-17)) >>
 * (shift - 16); |v| <= 2^30, so nothing overflows (docs/numerics.md section 6). */
static inline int32_t mt_rq16_32(int32_t acc, int32_t mult, int32_t shift)
{
  const int32_t half = 1 << (shift - 17);
#if MT_DSP
  return __smlawb(acc, mult, half) >> (shift - 16);
#else /* !MT_DSP */
  const int32_t v =
      (acc >> 16) * mult + (int32_t)((((uint32_t)acc & 0xFFFFu) * (uint32_t)mult) >> 16);
  return (v + half) >> (shift - 16);
#endif /* MT_DSP */
}

/* acc[r] += sum_{k < n} x[k] * w[r * ws + k] for r < nr (1 <= nr <= MT_MAC16_NR), in int32:
 * exact when no true partial sum leaves int32 (the fast form, or n <= MT_MAC16_CHUNK from 0). */
static MT_NOINLINE void mt_dot16_rows32(const int16_t *x, const int8_t *w, size_t ws, uint32_t n,
                                        int32_t nr, int32_t *acc)
{
  uint32_t k = 0;
#if MT_MVE
  if (n > 0) {
    const int8_t *w1 = nr > 1 ? w + ws : w, *w2 = nr > 2 ? w + 2 * ws : w;
    const int8_t *w3 = nr > 3 ? w + 3 * ws : w;
    int32_t v[4];
    vst1q_s32(v, mt_dot16x4_mve(x, w, w1, w2, w3, n, acc[0], nr > 1 ? acc[1] : 0,
                                nr > 2 ? acc[2] : 0, nr > 3 ? acc[3] : 0));
    for (int32_t r = 0; r < nr; r++) {
      acc[r] = v[r];
    }
  }
  k = n;
#elif MT_DSP && defined(__OPTIMIZE__) /* !MT_MVE */
  k = n & ~3u;
  if (k > 0) {
    mt_dot16_rows32_dsp(x, w, ws, k, nr, acc);
  }
#endif /* MT_MVE */
  for (int32_t r = 0; r < nr && k < n; r++) {
    const int8_t *wr = w + (size_t)r * ws;
    int32_t part = acc[r];
    for (uint32_t j = k; j < n; j++) {
      part += (int32_t)x[j] * wr[j];
    }
    acc[r] = part;
  }
}

/* mt_dot16_rows32 into int64 accumulators: int32 sums over chunks of MT_MAC16_CHUNK products. */
static inline void mt_dot16_rows(const int16_t *x, const int8_t *w, size_t ws, uint32_t n,
                                 int32_t nr, int64_t *acc)
{
  for (uint32_t k0 = 0; k0 < n; k0 += MT_MAC16_CHUNK) {
    int32_t part[MT_MAC16_NR] = {0};
    mt_dot16_rows32(x + k0, w + k0, ws, n - k0 < MT_MAC16_CHUNK ? n - k0 : MT_MAC16_CHUNK, nr,
                    part);
    for (int32_t r = 0; r < nr; r++) {
      acc[r] += part[r];
    }
  }
}

/* y[o + j] from the int32 accumulators acc[j] (j < nr) of the fast form. */
static inline void mt_out16_32_n(const mt_stage16 *s, const int32_t *acc, int32_t o, int32_t nr,
                                 int16_t *y)
{
#if MT_MVE
  mt_out16x4_mve(vldrwq_z_s32(acc, vctp32q((uint32_t)nr)), s->mult + o, s->shift + o, nr, s->lo,
                 s->hi, y + o);
#else /* !MT_MVE */
  for (int32_t j = 0; j < nr; j++) {
    const int32_t r = mt_rq16_32(acc[j], s->mult[o + j], s->shift[o + j]);
    y[o + j] = (int16_t)(r < s->lo ? s->lo : (r > s->hi ? s->hi : r));
  }
#endif /* MT_MVE */
}

/* Channels [o, o + nr) (nr <= MT_MAC16_NR) of one pixel from one run: acc = bias + sum_k x[k] *
 * w[j * ws + k], then y[o + j]. 0 (bad argument) when the 64-bit form meets an accumulator
 * beyond int48 or an rq beyond int32, which the program readers rule out. */
static inline int mt_mac16_run(const mt_stage16 *s, const int16_t *x, const int8_t *w, size_t ws,
                               uint32_t n, int32_t o, int32_t nr, int16_t *y)
{
  if (s->fast) {
    int32_t acc[MT_MAC16_NR];
    for (int32_t j = 0; j < nr; j++) {
      acc[j] = (int32_t)s->bias[o + j];
    }
    mt_dot16_rows32(x, w, ws, n, nr, acc);
    mt_out16_32_n(s, acc, o, nr, y);
    return 1;
  }
  int64_t acc[MT_MAC16_NR];
  for (int32_t j = 0; j < nr; j++) {
    acc[j] = s->bias[o + j];
  }
  mt_dot16_rows(x, w, ws, n, nr, acc);
  return mt_out16_n(acc, nr, s->mult + o, s->shift + o, s->lo, s->hi, y + o);
}

/* mt_mac16_run of every channel [0, n_c): 0 as mt_mac16_run. */
static inline int mt_mac16_channels(const mt_stage16 *s, const int16_t *x, const int8_t *w,
                                    size_t ws, uint32_t n, int32_t n_c, int16_t *y)
{
#if MT_MVE
  if (s->fast && n > 0) {
    mt_mac16_channels_mve(s, x, w, ws, n, n_c, y);
    return 1;
  }
#endif /* MT_MVE */
  for (int32_t o = 0; o < n_c; o += MT_MAC16_NR) {
    const int32_t nr = n_c - o < MT_MAC16_NR ? n_c - o : MT_MAC16_NR;
    if (!mt_mac16_run(s, x, w + (size_t)o * ws, ws, n, o, nr, y)) {
      return 0;
    }
  }
  return 1;
}

/* mt_mac16_channels of two pixels (windows xa, xb, outputs ya, yb): on MVE in the fast form
 * each weight load feeds both. */
static inline int mt_mac16_channels2(const mt_stage16 *s, const int16_t *xa, const int16_t *xb,
                                     const int8_t *w, size_t ws, uint32_t n, int32_t n_c,
                                     int16_t *ya, int16_t *yb)
{
#if MT_MVE && defined(__OPTIMIZE__)
  if (s->fast && n > 0) {
    mt_mac16_channels2_mve(s, xa, xb, w, ws, n, n_c, ya, yb);
    return 1;
  }
#endif /* MT_MVE && __OPTIMIZE__ */
  return mt_mac16_channels(s, xa, w, ws, n, n_c, ya) && mt_mac16_channels(s, xb, w, ws, n, n_c, yb);
}

#endif /* MT_MAC16_H */
