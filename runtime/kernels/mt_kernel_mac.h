/*
 * mt_kernel_mac.h - the inner loops of the MAC kernels (conv2d, fully_connected): one input run
 * against the weight rows of many output channels, four rows at a time (they share each x load),
 * and the output stage of a whole run of accumulators (mt_dot_rows_s8); the windows of several
 * conv2d output pixels against each weight row (mt_dot_px_s8, below).
 *
 * Zero points: the reference sums (x - in_zp) * w. The loops here sum the raw products x * w,
 * and the kernels add x_off * sum(w) (x_off = -in_zp) once per output, from mt_wsum_rows_s8:
 * sum (x + x_off) * w == sum x * w + x_off * sum w, exactly, on 32 bits (wrapping arithmetic; on
 * the reference's domain every accumulator fits int32). Taps in the padding add nothing to
 * either sum. This keeps the MVE loop at one VMLADAVA per 16 MACs: x_off (up to 128) does not
 * fit an int8 lane.
 *
 *   MVE   16 bytes per step: VLDRB (post-increment) + VMLADAVA per row; the tail predicated (VCTP)
 *   DSP   4 bytes per step: unaligned LDR, SXTB16 (bytes 0/2, then 1/3), two SMLAD per row
 *   C     one byte per step, the tail of the two above
 */
#ifndef MT_KERNEL_MAC_H
#define MT_KERNEL_MAC_H

#include "mt_kernel_util.h"

#define MT_MAC_CHUNK 64 /* output channels whose accumulators a kernel keeps (256 B of stack) */

/* Where mt_dot_rows_s8 puts its results: requantized into y (y[o] = clamp(rq(acc[o], mult[o],
 * shift[o]) + zp, lo, hi)), or, with y NULL, left as accumulators. */
typedef struct {
  const int32_t *mult, *shift;
  int32_t zp, lo, hi;
  int8_t *y;
} mt_out_stage;

/* mt_scales_ok without a branch per channel (checked on every call of a MAC kernel): mult >= 0
 * and 2 <= shift <= 62 exactly when no word mult | (shift - 2) | (62 - shift) (unsigned) has
 * its top bit set. */
static inline int mt_mac_scales_ok(const int32_t *mult, const int32_t *shift, uint32_t n)
{
  uint32_t bad = 0, i = 0;
#if MT_MVE
  uint32x4_t v = vdupq_n_u32(0);
  for (; n - i >= 4; i += 4) {
    const uint32x4_t s = vreinterpretq_u32_s32(vldrwq_s32(shift + i));
    v = vorrq_u32(v, vorrq_u32(vreinterpretq_u32_s32(vldrwq_s32(mult + i)),
                               vorrq_u32(vsubq_n_u32(s, 2), vsubq_u32(vdupq_n_u32(62), s))));
  }
  bad = vmaxvq_u32(0, v);
#else /* !MT_MVE */
  for (const int32_t *m = mult, *sh = shift, *end = mult + (n & ~1u); m != end; m += 2, sh += 2) {
    bad |= (uint32_t)m[0] | (uint32_t)m[1] | ((uint32_t)sh[0] - 2u) | (62u - (uint32_t)sh[0]) |
           ((uint32_t)sh[1] - 2u) | (62u - (uint32_t)sh[1]);
  }
  i = n & ~1u;
#endif /* MT_MVE */
  for (; i < n; i++) {
    bad |= (uint32_t)mult[i] | ((uint32_t)shift[i] - 2u) | (62u - (uint32_t)shift[i]);
  }
  return (bad >> 31) == 0;
}

#if !MT_MVE
/* The output stage of nb <= 4 channels o + b from init[b] + a[b] (see mt_dot_rows_s8); out of
 * the caller's loop: its pointer registers would be spilled around the inlined stage. */
static MT_NOINLINE void mt_store_rows(const mt_out_stage *out, int32_t o, int32_t nb,
                                      const uint32_t *init, const uint32_t *a, uint32_t *acc)
{
  if (out->y == NULL) {
    for (int32_t b = 0; b < nb; b++) {
      acc[b] = init[b] + a[b];
    }
    return;
  }
  const int32_t *mult = out->mult + o, *shift = out->shift + o;
  const int32_t zp = out->zp, lo = out->lo, hi = out->hi;
  int8_t *y = out->y + o;
  for (int32_t b = 0; b < nb; b++) {
    y[b] = mt_requantize(mt_wrap_s32(init[b] + a[b]), mult[b], shift[b], zp, lo, hi);
  }
}
#endif /* !MT_MVE */

/* acc[o] = init[o] + sum over i < n of x[i] * w[o * w_stride + i] for o < nc, wrapping on 32
 * bits (init may be acc), then stored by `out` (into acc when out->y is NULL). */
static MT_NOINLINE void mt_dot_rows_s8(const int8_t *x, const int8_t *w, size_t w_stride,
                                       uint32_t n, int32_t nc, const uint32_t *init, uint32_t *acc,
                                       const mt_out_stage *out)
{
  int32_t o = 0;
#if MT_MVE
  if (out->y != NULL && n > 0) { /* whole blocks of four, the output stage's constants hoisted */
    const int32x4_t v32 = vdupq_n_s32(32), vlo = vdupq_n_s32(out->lo - out->zp);
    const int32x4_t vhi = vdupq_n_s32(out->hi - out->zp);
    const int32_t zp = out->zp, *mult = out->mult, *shift = out->shift;
    const int32_t *in = (const int32_t *)init;
    int8_t *y = out->y;
    for (; nc - o >= 4; o += 4, w += 4 * w_stride) {
      int32x4_t v = mt_dot4_mve(x, w, w + w_stride, w + 2 * w_stride, w + 3 * w_stride, n);
      v = vaddq_s32(v, vldrwq_s32(in + o));
      const int32x4_t s = vldrwq_s32(shift + o);
      v = mt_rq_v(v, vldrwq_s32(mult + o), vsubq_s32(v32, s), vnegq_s32(s));
      vstrbq_s32(y + o, vaddq_n_s32(vminq_s32(vmaxq_s32(v, vlo), vhi), zp));
    }
  }
#endif /* MT_MVE */
  for (; o < nc; o += 4, w += 4 * w_stride) {
    const int32_t nb = nc - o < 4 ? nc - o : 4; /* rows past nb repeat the last one */
    const int8_t *w0 = w, *w1 = w + (nb > 1 ? w_stride : 0);
    const int8_t *w2 = w + (nb > 2 ? 2 * w_stride : 0), *w3 = w + (size_t)(nb - 1) * w_stride;
    const int8_t *xp = x;
#if MT_MVE
    const mve_pred16_t p = vctp32q((uint32_t)nb);
    int32x4_t v = n > 0 ? mt_dot4_mve(xp, w0, w1, w2, w3, n) : vdupq_n_s32(0);
    v = vaddq_s32(v, vldrwq_z_s32((const int32_t *)init + o, p));
    if (out->y == NULL) {
      vstrwq_p_s32((int32_t *)acc + o, v, p);
    } else {
      mt_requantize4_v(v, out->mult + o, out->shift + o, nb, out->zp, out->lo, out->hi, out->y + o);
    }
#else /* !MT_MVE */
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, left = n;
#if MT_DSP
    if (left >= 4) { /* in asm: gcc spills two accumulators of this loop written in C */
      const int8_t *const x_end = xp + (left & ~3u);
      uint32_t t0, t1, t2, t3;
/* clang-format off */
#define MT_DOT4_STEP /* 4 bytes of x against 4 bytes of each row */                          \
  "ldr %[t0], [%[x]], #4\n sxtb16 %[t1], %[t0]\n sxtb16 %[t0], %[t0], ror #8\n"                 \
  "ldr %[t2], [%[w0]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a0], %[t1], %[t3], %[a0]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a0], %[t0], %[t2], %[a0]\n"                             \
  "ldr %[t2], [%[w1]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a1], %[t1], %[t3], %[a1]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a1], %[t0], %[t2], %[a1]\n"                             \
  "ldr %[t2], [%[w2]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a2], %[t1], %[t3], %[a2]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a2], %[t0], %[t2], %[a2]\n"                             \
  "ldr %[t2], [%[w3]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a3], %[t1], %[t3], %[a3]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a3], %[t0], %[t2], %[a3]\n"
#define MT_DOT4_OPERANDS                                                                        \
  : [x] "+r"(xp), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [a0] "+r"(a0),    \
    [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0), [t1] "=&r"(t1),               \
    [t2] "=&r"(t2), [t3] "=&r"(t3)                                                              \
  : [end] "r"(x_end)                                                                            \
  : "cc", "memory"
      /* clang-format on */
      if (left & 4u) { /* an odd step first, then two per loop pass */
        __asm__ volatile(MT_DOT4_STEP MT_DOT4_OPERANDS);
      }
      if (xp != x_end) {
        /* clang-format off */
        __asm__ volatile("1: " MT_DOT4_STEP MT_DOT4_STEP "cmp %[x], %[end]\n bne 1b\n"
                         MT_DOT4_OPERANDS);
        /* clang-format on */
      }
#undef MT_DOT4_STEP
#undef MT_DOT4_OPERANDS
      left &= 3u;
    }
#endif /* MT_DSP */
    for (uint32_t i = 0; i < left; i++) {
      const int32_t xv = xp[i];
      a0 += (uint32_t)(xv * w0[i]);
      a1 += (uint32_t)(xv * w1[i]);
      a2 += (uint32_t)(xv * w2[i]);
      a3 += (uint32_t)(xv * w3[i]);
    }
    const uint32_t a[4] = {a0, a1, a2, a3};
    mt_store_rows(out, o, nb, init + o, a, acc + o);
#endif /* MT_MVE */
  }
}

/* sum[o] += sum over i < n of w[o * w_stride + i] for o < nc, wrapping on 32 bits. */
static MT_NOINLINE void mt_wsum_rows_s8(const int8_t *w, size_t w_stride, uint32_t n, int32_t nc,
                                        uint32_t *sum)
{
  int32_t o = 0;
#if MT_MVE
  for (; nc - o >= 4 && n > 0; o += 4, w += 4 * w_stride) { /* four rows per DLSTP loop */
    const int8_t *w0 = w, *w1 = w + w_stride, *w2 = w + 2 * w_stride, *w3 = w + 3 * w_stride;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    /* clang-format off */
    __asm__ volatile("   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[w0]], #16\n"
                     "   vaddva.s8 %[s0], q0\n"
                     "   vldrb.8 q1, [%[w1]], #16\n"
                     "   vaddva.s8 %[s1], q1\n"
                     "   vldrb.8 q0, [%[w2]], #16\n"
                     "   vaddva.s8 %[s2], q0\n"
                     "   vldrb.8 q1, [%[w3]], #16\n"
                     "   vaddva.s8 %[s3], q1\n"
                     "   letp lr, 1b\n"
                     : [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3),
                       [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3)
                     : [n] "r"(n)
                     : "q0", "q1", "lr", "memory");
    /* clang-format on */
    sum[o] += (uint32_t)s0;
    sum[o + 1] += (uint32_t)s1;
    sum[o + 2] += (uint32_t)s2;
    sum[o + 3] += (uint32_t)s3;
  }
#endif /* MT_MVE */
  for (; o < nc; o++, w += w_stride) {
    uint32_t s = 0, i = 0;
#if MT_MVE
    for (; n - i >= 16; i += 16) {
      s = (uint32_t)vaddvaq_s8((int32_t)s, vldrbq_s8(w + i));
    }
    if (i < n) {
      s = (uint32_t)vaddvaq_s8((int32_t)s, vldrbq_z_s8(w + i, vctp8q(n - i)));
      i = n;
    }
#else /* !MT_MVE */
#if MT_DSP
    for (; n - i >= 4; i += 4) {
      const uint32_t v = mt_read_s8x4(w + i);
      s = (uint32_t)__smlad(__sxtb16((int32_t)v), 0x00010001,
                            __smlad(mt_sxtb16_ror8(v), 0x00010001, (int32_t)s));
    }
#endif /* MT_DSP */
#endif /* MT_MVE */
    for (; i < n; i++) {
      s += (uint32_t)(int32_t)w[i];
    }
    sum[o] += s;
  }
}

/* dst[i] = src ? src[i] : fill, i < n (n small: a kernel row of a window being gathered). */
static inline void mt_fill_s8(int8_t *dst, const int8_t *src, size_t n, int32_t fill)
{
  size_t i = 0;
#if MT_MVE /* tail-predicated loops, skipped when n == 0 */
  if (src != NULL) {
    /* clang-format off */
    __asm__ volatile("   wlstp.8 lr, %[n], 2f\n"
                     "1: vldrb.8 q0, [%[s]], #16\n"
                     "   vstrb.8 q0, [%[d]], #16\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [s] "+r"(src), [d] "+r"(dst)
                     : [n] "r"(n)
                     : "q0", "lr", "memory");
    /* clang-format on */
  } else {
    /* clang-format off */
    __asm__ volatile("   vdup.8 q0, %[f]\n"
                     "   wlstp.8 lr, %[n], 2f\n"
                     "1: vstrb.8 q0, [%[d]], #16\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [d] "+r"(dst)
                     : [n] "r"(n), [f] "r"(fill)
                     : "q0", "lr", "memory");
    /* clang-format on */
  }
  i = n;
#elif MT_DSP
  const uint32_t f = (uint32_t)(uint8_t)fill * 0x01010101u;
  for (; n - i >= 4; i += 4) {
    const uint32_t v = src ? mt_read_s8x4(src + i) : f;
    __builtin_memcpy(dst + i, &v, 4);
  }
#endif /* MT_MVE */
  for (; i < n; i++) {
    dst[i] = src ? src[i] : (int8_t)fill;
  }
}

/* ---- several output pixels at once (conv2d) ----------------------------------------------
 * The windows of np <= MT_PX output pixels against each weight row: each weight load feeds
 * every pixel, and the output stage runs once per channel (MVE: one channel of four pixels in
 * four lanes) or per 2x2 block. Pixel p's window is `rows` runs of `run` bytes at
 * x + p * px_stride + r * row_stride (x + px_stride readable even when np == 1); a weight
 * row is those k = rows * run bytes, rows w + o * k.
 *
 *   MVE   4 pixels x 1 channel: per 16 bytes 5 VLDRB + 4 VMLADAVA, the four pixels' sums
 *         requantized in four lanes (one mult/shift); rows == 1 only
 *   DSP   2 pixels x 2 channels: per 4 bytes 4 LDR + 8 SXTB16 + 8 SMLAD; rows == 1,
 *         px_stride == k (the windows gathered back to back); else (nc == 1) the C loop
 *   C     2 pixels x 2 channels, any runs; with a 32x32->64 multiply-accumulate (not Armv6-M /
 *         Armv8-M Baseline) the two pixels share one product: x0 + 2^23 * x1 times w summed on
 *         64 bits holds both sums exactly while at most 255 products are added (each sum stays
 *         inside +-2^22; flushed every 255). Windows of <= MT_PACK_MAX bytes are packed into
 *         such words once, for all channel pairs (per product: LDR, LDRSB, SMLAL per channel). */
typedef struct {
  const int8_t *x;
  size_t px_stride, row_stride;
  uint32_t run;
  int32_t rows, np;
} mt_px_src;

#if MT_MVE
#define MT_PX 4
#else
#define MT_PX 2
#endif /* MT_MVE */
#if !MT_MVE && !MT_DSP && !defined(__ARM_ARCH_6M__) && !defined(__ARM_ARCH_8M_BASE__)
#define MT_MUL64    1
#define MT_PACK_MAX 640 /* the longest window packed (words on the stack) */
#else
#define MT_MUL64 0
#endif

#if !MT_MVE
#if MT_MUL64
/* s[0..3] += the two pixels' sums held in a0, a1 (see above); a0 = a1 = 0 after. */
static inline void mt_split2x2(int64_t *a0, int64_t *a1, uint32_t s[4])
{
  const int32_t l0 = ((int32_t)(*a0 & 0x7FFFFF) ^ 0x400000) - 0x400000;
  const int32_t l1 = ((int32_t)(*a1 & 0x7FFFFF) ^ 0x400000) - 0x400000;
  s[0] += (uint32_t)l0, s[1] += (uint32_t)l1;
  s[2] += (uint32_t)(int32_t)((*a0 - l0) >> 23), s[3] += (uint32_t)(int32_t)((*a1 - l1) >> 23);
  *a0 = 0, *a1 = 0;
}
#endif /* MT_MUL64 */

/* s[2 * p + j] += sum over the window of pixel p (at src->x + p * ps) of x * w_j (wrapping),
 * p, j in {0, 1}; w_j: the weight row of channel j. DSP: src->rows == 1. */
static inline void mt_dot2x2_s8(const mt_px_src *src, size_t ps, const int8_t *w0, const int8_t *w1,
                                uint32_t s[4])
{
#if MT_MUL64
  int64_t a0 = 0, a1 = 0; /* a_j = sum x0 * w_j + 2^23 * sum x1 * w_j over `used` products */
  uint32_t used = 0;
  for (int32_t r = 0; r < src->rows; r++) {
    const int8_t *x0 = src->x + (size_t)r * src->row_stride, *x1 = x0 + ps;
    for (uint32_t n = src->run, len; n > 0; n -= len, used += len) {
      if (used == 255) {
        mt_split2x2(&a0, &a1, s);
        used = 0;
      }
      len = n < 255 - used ? n : 255 - used;
      for (uint32_t i = 0; i < len; i++) {
        const int32_t u = x0[i] + x1[i] * 8388608;
        a0 += (int64_t)w0[i] * u;
        a1 += (int64_t)w1[i] * u;
      }
      x0 += len, x1 += len, w0 += len, w1 += len;
    }
  }
  mt_split2x2(&a0, &a1, s);
#else /* !MT_MUL64 */
  uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int32_t r = 0; r < src->rows; r++, w0 += src->run, w1 += src->run) {
    const int8_t *x0 = src->x + (size_t)r * src->row_stride, *x1 = x0 + ps;
    const uint32_t n = src->run;
    uint32_t i = 0;
#if MT_DSP
    if (n >= 4 && x1 - x0 == w1 - w0) { /* x1 = x0 + d, w1 = w0 + d: 14 registers in all */
      const int8_t *xp = x0, *wp = w0, *const x_end = x0 + (n & ~3u);
      const int32_t d = (int32_t)(x1 - x0);
      uint32_t t0, t1, t2, t3, t4, t5;
/* clang-format off */
#define MT_DOT2X2_STEP /* 4 bytes: rows w0, w1 unpacked once, x1 then x0 against both */      \
  "ldr %[t1], [%[w], %[d]]\n ldr %[t0], [%[w]], #4\n sxtb16 %[t2], %[t0]\n"                    \
  "sxtb16 %[t0], %[t0], ror #8\n sxtb16 %[t3], %[t1]\n sxtb16 %[t1], %[t1], ror #8\n"          \
  "ldr %[t4], [%[x], %[d]]\n sxtb16 %[t5], %[t4]\n sxtb16 %[t4], %[t4], ror #8\n"              \
  "smlad %[a2], %[t2], %[t5], %[a2]\n smlad %[a2], %[t0], %[t4], %[a2]\n"                       \
  "smlad %[a3], %[t3], %[t5], %[a3]\n smlad %[a3], %[t1], %[t4], %[a3]\n"                       \
  "ldr %[t4], [%[x]], #4\n sxtb16 %[t5], %[t4]\n sxtb16 %[t4], %[t4], ror #8\n"                \
  "smlad %[a0], %[t2], %[t5], %[a0]\n smlad %[a0], %[t0], %[t4], %[a0]\n"                       \
  "smlad %[a1], %[t3], %[t5], %[a1]\n smlad %[a1], %[t1], %[t4], %[a1]\n"
#define MT_DOT2X2_OPERANDS                                                                      \
  : [x] "+r"(xp), [w] "+r"(wp), [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),    \
    [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),            \
    [t5] "=&r"(t5)                                                                              \
  : [d] "r"(d), [end] "r"(x_end)                                                                \
  : "cc", "memory"
      /* clang-format on */
      if (n & 4u) { /* an odd step first, then two per loop pass */
        __asm__ volatile(MT_DOT2X2_STEP MT_DOT2X2_OPERANDS);
      }
      if (xp != x_end) {
        /* clang-format off */
        __asm__ volatile("1: " MT_DOT2X2_STEP MT_DOT2X2_STEP "cmp %[x], %[end]\n bne 1b\n"
                         MT_DOT2X2_OPERANDS);
        /* clang-format on */
      }
#undef MT_DOT2X2_STEP
#undef MT_DOT2X2_OPERANDS
      i = n & ~3u;
    }
#endif /* MT_DSP */
    for (; i < n; i++) {
      const int32_t u = x0[i], v = x1[i];
      a0 += (uint32_t)(u * w0[i]);
      a1 += (uint32_t)(u * w1[i]);
      a2 += (uint32_t)(v * w0[i]);
      a3 += (uint32_t)(v * w1[i]);
    }
  }
  s[0] += a0, s[1] += a1, s[2] += a2, s[3] += a3;
#endif /* MT_MUL64 */
}
#endif /* !MT_MVE */

/* y[p * y_stride + o] = out(base[o] + sum over the window of pixel p of x * w_o), p < np,
 * o < nc (out->y: the first pixel's output channel 0). */
static MT_NOINLINE void mt_dot_px_s8(const mt_px_src *s, const int8_t *w, int32_t nc,
                                     const uint32_t *base, const mt_out_stage *out, size_t y_stride)
{
  const size_t k = (size_t)s->rows * s->run;
  const int32_t np = s->np;
#if MT_MVE
  const size_t ps = s->px_stride;
  const int8_t *x0 = s->x, *x1 = x0 + (np > 1 ? ps : 0), *x2 = x0 + (np > 2 ? 2 * ps : 0);
  const int8_t *x3 = x0 + (size_t)(np - 1) * ps; /* pixels past np repeat the last one */
  /* pixel p's output at y + offs[p]: pixels past np store the last one's again */
  const uint32x4_t offs =
      vmulq_n_u32(vminq_u32(vidupq_n_u32(0, 1), vdupq_n_u32((uint32_t)np - 1)), (uint32_t)y_stride);
  const int32x4_t vlo = vdupq_n_s32(out->lo - out->zp), vhi = vdupq_n_s32(out->hi - out->zp);
  const int32_t *mult = out->mult, *shift = out->shift, zp = out->zp;
  int8_t *y = out->y;
  for (int32_t o = 0; o < nc; o++, w += k) {
    int32x4_t v = mt_dot4_mve(w, x0, x1, x2, x3, (uint32_t)k);
    v = vaddq_n_s32(v, (int32_t)base[o]);
    v = mt_rq_n_v(v, mult[o], shift[o]);
    vstrbq_scatter_offset_s32(y + o, offs, vaddq_n_s32(vminq_s32(vmaxq_s32(v, vlo), vhi), zp));
  }
#else /* !MT_MVE */
  const size_t ps = s->px_stride;
#if MT_MUL64
  int32_t xx[MT_PACK_MAX]; /* x0 + 2^23 * x1 over both windows, packed once for all channels */
  for (int32_t r = 0, j = 0; r < s->rows && k <= MT_PACK_MAX; r++) {
    const int8_t *x0 = s->x + (size_t)r * s->row_stride, *x1 = x0 + ps;
    for (uint32_t i = 0; i < s->run; i++) {
      xx[j++] = x0[i] + x1[i] * 8388608;
    }
  }
#endif /* MT_MUL64 */
  for (int32_t o = 0; o < nc; o += 2) {
    const int32_t ob = o + 1 < nc ? o + 1 : o, oa = ob - (ob > 0); /* odd nc: the last pairs back */
    const int8_t *w0 = w + (size_t)oa * k, *w1 = w + (size_t)ob * k;
    uint32_t a[4] = {0, 0, 0, 0};
#if MT_MUL64
    if (k <= MT_PACK_MAX) { /* per product one word load and two byte loads */
      int64_t a0 = 0, a1 = 0;
      for (uint32_t i = 0, end; i < k; i = end) {
        end = k - i < 255 ? (uint32_t)k : i + 255;
        for (uint32_t j = i; j < end; j++) {
          a0 += (int64_t)w0[j] * xx[j];
          a1 += (int64_t)w1[j] * xx[j];
        }
        mt_split2x2(&a0, &a1, a);
      }
    } else
#endif /* MT_MUL64 */
    {
      mt_dot2x2_s8(s, ps, w0, w1, a);
    }
    const int32_t ch[2] = {oa, ob};
    for (int32_t q = 0; q < 2 * np; q++) {
      const int32_t c = ch[q & 1];
      out->y[(size_t)(q >> 1) * y_stride + (size_t)c] = mt_requantize(
          mt_wrap_s32(base[c] + a[q]), out->mult[c], out->shift[c], out->zp, out->lo, out->hi);
    }
  }
#endif /* MT_MVE */
}

#endif /* MT_KERNEL_MAC_H */
