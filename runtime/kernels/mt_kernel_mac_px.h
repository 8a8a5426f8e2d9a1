/*
 * mt_kernel_mac_px.h - the MAC loop of conv2d over several output pixels at once.
 *
 * The windows of np <= MT_PX output pixels against each weight row: each weight load feeds
 * every pixel, and the output stage runs once per channel (MVE: one channel of four pixels in
 * four lanes) or per 2x2 block. Pixel p's window is `rows` runs of `run` bytes at
 * x + p * px_stride + r * row_stride (x + px_stride readable even when np == 1); a weight
 * row is those k = rows * run bytes, rows w + o * w_stride (>= k). The output stage may add
 * the residual (mt_out_stage.add): each output byte is stored once (MVE: a repeated pixel's
 * lanes store the same value to the same byte in one scatter).
 *
 *   MVE   4 pixels x 1 channel: per 16 bytes 5 VLDRB + 4 VMLADAVA, the four pixels' sums
 *         requantized in four lanes (one mult/shift); rows == 1 only
 *   DSP   2 pixels x 2 channels: per 4 bytes 4 LDR + 8 SXTB16 + 8 SMLAD; rows == 1,
 *         px_stride == w_stride (windows gathered as weight rows are); else (nc == 1) the C loop
 *   C     2 pixels x 2 channels, any runs; with a 32x32->64 multiply-accumulate (not Armv6-M /
 *         Armv8-M Baseline) the two pixels share one product: x0 + 2^23 * x1 times w summed on
 *         64 bits holds both sums exactly while at most 255 products are added (each sum stays
 *         inside +-2^22; flushed every 255). Windows of <= MT_PACK_MAX bytes are packed into
 *         such words once, for all channel pairs (per product: LDR, LDRSB, SMLAL per channel).
 */
#ifndef MT_KERNEL_MAC_PX_H
#define MT_KERNEL_MAC_PX_H

#include "mt_kernel_mac.h" /* mt_out_stage */

typedef struct {
  const int8_t *x;
  size_t px_stride, row_stride;
  uint32_t run;
  int32_t rows, np;
  size_t w_stride; /* bytes from one weight row to the next (k: back to back) */
} mt_px_src;

#if MT_MVE
#define MT_PX 4
#else /* !MT_MVE */
#define MT_PX 2
#endif /* MT_MVE */
#if !MT_MVE && !MT_DSP && !defined(__ARM_ARCH_6M__) && !defined(__ARM_ARCH_8M_BASE__)
#define MT_MUL64    1
#define MT_PACK_MAX 640 /* the longest window packed (words on the stack) */
#else /* MVE, DSP, or no 64-bit multiply-accumulate */
#define MT_MUL64 0
#endif /* a 64-bit multiply-accumulate, no SIMD */

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

#if MT_MUL64
/* mt_dot2x2_s8 with a 32x32->64 multiply-accumulate: both pixels in one product (see above). */
static MT_ALWAYS_INLINE void mt_dot2x2_mul64(const mt_px_src *src, size_t ps, const int8_t *w0,
                                             const int8_t *w1, uint32_t s[4])
{
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
}
#else /* !MT_MUL64 */
/* mt_dot2x2_s8 on 32-bit accumulators: per run the DSP loop (mt_dot2x2_dsp) when the pixel and
 * row steps agree, then one byte per step. */
static MT_ALWAYS_INLINE void mt_dot2x2_32(const mt_px_src *src, size_t ps, const int8_t *w0,
                                          const int8_t *w1, uint32_t s[4])
{
  uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int32_t r = 0; r < src->rows; r++, w0 += src->run, w1 += src->run) {
    const int8_t *x0 = src->x + (size_t)r * src->row_stride, *x1 = x0 + ps;
    const uint32_t n = src->run;
    uint32_t i = 0;
#if MT_DSP
    if (n >= 4 && x1 - x0 == w1 - w0) { /* x1 = x0 + d, w1 = w0 + d: 14 registers in all */
      uint32_t a[4] = {a0, a1, a2, a3};
      i = mt_dot2x2_dsp(x0, w0, (int32_t)(x1 - x0), n, a);
      a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
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
}
#endif /* MT_MUL64 */

/* s[2 * p + j] += sum over the window of pixel p (at src->x + p * ps) of x * w_j (wrapping),
 * p, j in {0, 1}; w_j: the weight row of channel j. DSP: src->rows == 1. */
static inline void mt_dot2x2_s8(const mt_px_src *src, size_t ps, const int8_t *w0, const int8_t *w1,
                                uint32_t s[4])
{
#if MT_MUL64
  mt_dot2x2_mul64(src, ps, w0, w1, s);
#else /* !MT_MUL64 */
  mt_dot2x2_32(src, ps, w0, w1, s);
#endif /* MT_MUL64 */
}
#endif /* !MT_MVE */

#if MT_MVE
/* mt_dot_px_s8 on MVE: one channel of the (up to) four pixels per pass, in four lanes. */
static MT_ALWAYS_INLINE void mt_dot_px_mve(const mt_px_src *s, const int8_t *w, int32_t nc,
                                           const uint32_t *base, const mt_out_stage *out,
                                           size_t y_stride, int with_add)
{
  const size_t k = (size_t)s->rows * s->run, ws = s->w_stride;
  const int32_t np = s->np;
  const size_t ps = s->px_stride;
  const int8_t *x0 = s->x, *x1 = x0 + (np > 1 ? ps : 0), *x2 = x0 + (np > 2 ? 2 * ps : 0);
  const int8_t *x3 = x0 + (size_t)(np - 1) * ps; /* pixels past np repeat the last one */
  /* pixel p's output at y + offs[p]: pixels past np store the last one's again */
  const uint32x4_t offs =
      vmulq_n_u32(vminq_u32(vidupq_n_u32(0, 1), vdupq_n_u32((uint32_t)np - 1)), (uint32_t)y_stride);
  const int32x4_t vlo = vdupq_n_s32(out->lo - out->zp), vhi = vdupq_n_s32(out->hi - out->zp);
  const int32_t *mult = out->mult, *shift = out->shift, zp = out->zp;
  int8_t *y = out->y;
  for (int32_t o = 0; o < nc; o++, w += ws) {
    int32x4_t v = mt_dot4_mve(w, x0, x1, x2, x3, (uint32_t)k);
    v = vaddq_n_s32(v, (int32_t)base[o]);
    v = vminq_s32(vmaxq_s32(mt_rq_n_v(v, mult[o], shift[o]), vlo), vhi);
    if (with_add) { /* skip's four bytes gathered before y's are stored over them */
      const int8_t *skip = mt_add_skip(out->add, y + o);
      v = mt_add_stage_v(out->add, v, vldrbq_gather_offset_s32(skip, offs));
    } else {
      v = vaddq_n_s32(v, zp);
    }
    vstrbq_scatter_offset_s32(y + o, offs, v);
  }
}
#else /* !MT_MVE */
/* mt_dot_px_s8 on DSP and in C: two channels of the (up to) two pixels per pass. */
static MT_ALWAYS_INLINE void mt_dot_px_c(const mt_px_src *s, const int8_t *w, int32_t nc,
                                         const uint32_t *base, const mt_out_stage *out,
                                         size_t y_stride, int with_add)
{
  const size_t ws = s->w_stride;
  const int32_t np = s->np;
  const size_t ps = s->px_stride;
#if MT_MUL64
  const size_t k = (size_t)s->rows * s->run;
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
    const int8_t *w0 = w + (size_t)oa * ws, *w1 = w + (size_t)ob * ws;
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
    if (!with_add) {
      for (int32_t q = 0; q < 2 * np; q++) {
        const int32_t c = ch[q & 1];
        out->y[(size_t)(q >> 1) * y_stride + (size_t)c] = mt_requantize(
            mt_wrap_s32(base[c] + a[q]), out->mult[c], out->shift[c], out->zp, out->lo, out->hi);
      }
      continue;
    }
    const int32_t pair = o + 1 < nc; /* else only ob is new: each byte stored once */
    for (int32_t q = !pair; q < 2 * np; q += 2 - pair) {
      const int32_t c = ch[q & 1];
      const int8_t v = mt_requantize(mt_wrap_s32(base[c] + a[q]), out->mult[c], out->shift[c],
                                     out->zp, out->lo, out->hi);
      mt_add_stage_store(out->add, v, out->y + (size_t)(q >> 1) * y_stride + (size_t)c);
    }
  }
}
#endif /* MT_MVE */

/* y[p * y_stride + o] = out(base[o] + sum over the window of pixel p of x * w_o), p < np,
 * o < nc (out->y: the first pixel's output channel 0); out->add NULL. */
static MT_NOINLINE void mt_dot_px_s8(const mt_px_src *s, const int8_t *w, int32_t nc,
                                     const uint32_t *base, const mt_out_stage *out, size_t y_stride)
{
#if MT_MVE
  mt_dot_px_mve(s, w, nc, base, out, y_stride, 0);
#else /* !MT_MVE */
  mt_dot_px_c(s, w, nc, base, out, y_stride, 0);
#endif /* MT_MVE */
}

/* mt_dot_px_s8 with the residual add (out->add): a function of its own, so that the plain one
 * keeps its registers. */
static MT_NOINLINE void mt_dot_px_add_s8(const mt_px_src *s, const int8_t *w, int32_t nc,
                                         const uint32_t *base, const mt_out_stage *out,
                                         size_t y_stride)
{
#if MT_MVE
  mt_dot_px_mve(s, w, nc, base, out, y_stride, 1);
#else /* !MT_MVE */
  mt_dot_px_c(s, w, nc, base, out, y_stride, 1);
#endif /* MT_MVE */
}

#endif /* MT_KERNEL_MAC_PX_H */
