/*
 * mt_kernel_mac.h - the inner loops of the MAC kernels (conv2d, fully_connected): one input run
 * against the weight rows of many output channels, four rows at a time (they share each x load),
 * and the output stage of a whole run of accumulators (mt_dot_rows_s8); the windows of several
 * conv2d output pixels against each weight row are in mt_kernel_mac_px.h (mt_dot_px_s8).
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

#include "mt_kernel_add_stage.h" /* mt_add_stage: conv2d_add's residual add in the output stage */
#include "mt_kernel_util.h"

/* One input run against four weight rows: the bytes of x and of each w_j not yet summed, and
 * the four sums a_j so far (wrapping). */
typedef struct {
  const int8_t *x, *w0, *w1, *w2, *w3;
  uint32_t a0, a1, a2, a3;
} mt_dot4_run;

#include "mt_kernel_mac_dsp.h" /* mt_dot_block_dsp, mt_dot2x2_dsp: the DSP dot loops in asm */

#define MT_MAC_CHUNK 64 /* output channels whose accumulators a kernel keeps (256 B of stack) */

/* Where mt_dot_rows_s8 puts its results: requantized into y (y[o] = clamp(rq(acc[o], mult[o],
 * shift[o]) + zp, lo, hi)), or, with y NULL, left as accumulators. With `add`, y[o] is then
 * add(that value, y[o]'s skip element) (mt_kernel_add_stage.h), each y[o] stored once. */
typedef struct {
  const int32_t *mult, *shift;
  int32_t zp, lo, hi;
  int8_t *y;
  const mt_add_stage *add; /* NULL: plain output stage */
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

#if MT_MVE
/* Channels [0, nc & ~3) of mt_dot_rows_s8 when it requantizes (out->y, n > 0): whole blocks
 * of four, the output stage's constants hoisted (with_add: out->add, a constant per call site);
 * returns the channels done. */
static MT_ALWAYS_INLINE int32_t mt_dot_rows4_mve(const int8_t *x, const int8_t *w, size_t w_stride,
                                                 uint32_t n, int32_t nc, const uint32_t *init,
                                                 const mt_out_stage *out, int with_add)
{
  int32_t o = 0;
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
    v = vminq_s32(vmaxq_s32(v, vlo), vhi);
    if (with_add) {
      v = mt_add_stage_v(out->add, v, vldrbq_s32(mt_add_skip(out->add, y + o)));
    } else {
      v = vaddq_n_s32(v, zp);
    }
    vstrbq_s32(y + o, v);
  }
  return o;
}

/* Channels o + b, b < nb <= 4, of mt_dot_rows_s8 (rows w0..w3, predicated lanes). */
static MT_ALWAYS_INLINE void mt_dot_block_mve(const mt_dot4_run *r, uint32_t n, int32_t o,
                                              int32_t nb, const uint32_t *init, uint32_t *acc,
                                              const mt_out_stage *out)
{
  const mve_pred16_t p = vctp32q((uint32_t)nb);
  int32x4_t v = n > 0 ? mt_dot4_mve(r->x, r->w0, r->w1, r->w2, r->w3, n) : vdupq_n_s32(0);
  v = vaddq_s32(v, vldrwq_z_s32((const int32_t *)init + o, p));
  if (out->y == NULL) {
    vstrwq_p_s32((int32_t *)acc + o, v, p);
  } else if (out->add == NULL) {
    mt_requantize4_v(v, out->mult + o, out->shift + o, nb, out->zp, out->lo, out->hi, out->y + o);
  } else { /* the add on the conv values less zp (mt_add_stage_v) */
    const int32x4_t s = vldrwq_z_s32(out->shift + o, p);
    v = mt_requantize_v(v, vldrwq_z_s32(out->mult + o, p), vsubq_s32(vdupq_n_s32(32), s),
                        vnegq_s32(s), 0, out->lo - out->zp, out->hi - out->zp);
    const int8_t *skip = mt_add_skip(out->add, out->y + o);
    vstrbq_p_s32(out->y + o, mt_add_stage_v(out->add, v, vldrbq_z_s32(skip, p)), p);
  }
}
#else /* !MT_MVE */
/* r->a_j += sum over i < n of r->x[i] * r->w_j[i], one byte per step (the tail of DSP). */
static MT_ALWAYS_INLINE void mt_dot_block_c(mt_dot4_run *r, uint32_t n)
{
  const int8_t *x = r->x, *w0 = r->w0, *w1 = r->w1, *w2 = r->w2, *w3 = r->w3;
  uint32_t a0 = r->a0, a1 = r->a1, a2 = r->a2, a3 = r->a3;
  for (uint32_t i = 0; i < n; i++) {
    const int32_t xv = x[i];
    a0 += (uint32_t)(xv * w0[i]);
    a1 += (uint32_t)(xv * w1[i]);
    a2 += (uint32_t)(xv * w2[i]);
    a3 += (uint32_t)(xv * w3[i]);
  }
  r->a0 = a0, r->a1 = a1, r->a2 = a2, r->a3 = a3;
}

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
    const int8_t c = mt_requantize(mt_wrap_s32(init[b] + a[b]), mult[b], shift[b], zp, lo, hi);
    if (out->add != NULL) {
      mt_add_stage_store(out->add, c, y + b);
    } else {
      y[b] = c;
    }
  }
}
#endif /* MT_MVE */

/* acc[o] = init[o] + sum over i < n of x[i] * w[o * w_stride + i] for o < nc, wrapping on 32
 * bits (init may be acc), then stored by `out` (into acc when out->y is NULL). */
static MT_NOINLINE void mt_dot_rows_s8(const int8_t *x, const int8_t *w, size_t w_stride,
                                       uint32_t n, int32_t nc, const uint32_t *init, uint32_t *acc,
                                       const mt_out_stage *out)
{
  int32_t o = 0;
#if MT_MVE
  if (out->y != NULL && n > 0) {
    o = out->add != NULL ? mt_dot_rows4_mve(x, w, w_stride, n, nc, init, out, 1)
                         : mt_dot_rows4_mve(x, w, w_stride, n, nc, init, out, 0);
    w += (size_t)o * w_stride;
  }
#endif /* MT_MVE */
  for (; o < nc; o += 4, w += 4 * w_stride) {
    const int32_t nb = nc - o < 4 ? nc - o : 4; /* rows past nb repeat the last one */
    const int8_t *w1 = w + (nb > 1 ? w_stride : 0), *w2 = w + (nb > 2 ? 2 * w_stride : 0);
    mt_dot4_run r = {x, w, w1, w2, w + (size_t)(nb - 1) * w_stride, 0, 0, 0, 0};
#if MT_MVE
    mt_dot_block_mve(&r, n, o, nb, init, acc, out);
#else /* !MT_MVE */
    uint32_t left = n;
#if MT_DSP
    left = mt_dot_block_dsp(&r, n);
#endif /* MT_DSP */
    mt_dot_block_c(&r, left);
    const uint32_t a[4] = {r.a0, r.a1, r.a2, r.a3};
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

#endif /* MT_KERNEL_MAC_H */
