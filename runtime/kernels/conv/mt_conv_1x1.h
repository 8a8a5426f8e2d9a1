/*
 * mt_conv_1x1.h - the 1x1 convolution fast path of mt_conv2d_s8 (groups == 1, every window
 * inside the input): a matrix product of the input pixels (rows of Cin bytes, taken every
 * stride) with the weight rows (Cout x Cin), per-channel requantization.
 *
 * conv1x1_run returns 1 when it computed y, 0 when the shape is left to the general path.
 * The MVE variant lives in mt_conv_1x1_mve.h (its algorithm differs wholesale).
 *
 * DSP and C variants: output pixels go in pairs. Both pixels are unpacked once, x_off added,
 * into a stack buffer laid out for the dot loop (so the zero point costs nothing per MAC);
 * then every pair of output channels is a 2 x 2 block: each loaded x word and weight word
 * feeds two MACs. One asm loop (mt_conv_1x1_dots.h) runs the blocks of up to 64 channels back
 * to back (DSP: LDM, SXTB16, SMLAD; Cortex-M3: LDM, LDRSB, MLA), storing the accumulators; a
 * short loop then requantizes them (for shift > 32 and the range [-128, 127]: SMULL, add,
 * shift, SSAT).
 * An odd last pixel or channel is paired with itself (computed twice, stored twice to the same
 * byte; once with conv2d_add's residual add). Cin above the buffer (256) goes to the general
 * path.
 */
#ifndef MT_CONV_1X1_H
#define MT_CONV_1X1_H

#include "mt_kernel_add_stage.h"
#include "mt_kernel_util.h"

typedef struct {
  const int8_t *x, *w; /* x: (N, H, W, Cin); w: (Cout, Cin) */
  const int32_t *bias, *mult, *shift;
  int8_t *y; /* (N, Ho, Wo, Cout) */
  int32_t batch, h, w_in, cin, cout, ho, wo, stride_h, stride_w;
  int32_t x_off, out_zp, act_min, act_max;
  const mt_add_stage *add; /* NULL, or conv2d_add's residual add (mt_kernel_add.h) */
} mt_conv1x1;

#if MT_MVE
#include "mt_conv_1x1_mve.h" /* conv1x1_mve */
#else /* !MT_MVE */
#if defined(__ARM_FEATURE_SAT)
#include <arm_acle.h> /* __ssat */
#endif /* __ARM_FEATURE_SAT */

#include "mt_conv_1x1_dots.h" /* C1X1_DSP, C1X1_T2, C1X1_K; c1x1_dots, the dot loop */

#define C1X1_BUF 512 /* int32 words of unpacked input: two pixels of up to 256 channels (C) */

/* Where the output pixels' inputs are: the next one at row + ox * stride_w * Cin. At the end of
 * an output row the row moves stride_h rows on; at the end of an image it moves on to the next
 * image's first row, H - (Ho - 1) * stride_h >= 1 rows on (every window lies inside the input),
 * so it never leaves the input (after the last image: one past its end). */
typedef struct {
  const int8_t *row; /* input row of the current output row */
  int32_t ox, oy;
} c1x1_cursor;

static const int8_t *c1x1_next(const mt_conv1x1 *p, c1x1_cursor *c)
{
  const int8_t *px = c->row + (size_t)c->ox * (size_t)p->stride_w * (size_t)p->cin;
  if (++c->ox == p->wo) {
    c->ox = 0;
    int32_t rows = p->stride_h;
    if (++c->oy == p->ho) { /* next image */
      c->oy = 0;
      rows = p->h - (p->ho - 1) * p->stride_h;
    }
    c->row += (size_t)rows * (size_t)p->w_in * (size_t)p->cin;
  }
  return px;
}

/* buf = pixels xa, xb (Cin bytes each) plus x_off as the dot loops read them. DSP: per four
 * channels k, the halfword pairs (xa[k], xa[k+2]), (xa[k+1], xa[k+3]), then the same of xb
 * (the lanes SXTB16 / SXTB16 ROR #8 make of a weight word); C and the last Cin % 8 channels on
 * DSP: per channel, the words xa[k], xb[k]. */
static void c1x1_unpack(const int8_t *xa, const int8_t *xb, int32_t cin, int32_t x_off,
                        int32_t *buf)
{
  int32_t k = 0;
#if C1X1_DSP
  const int32_t off2 = (int32_t)(((uint32_t)x_off << 16) | ((uint32_t)x_off & 0xFFFFu));
  for (; k < (cin & ~(C1X1_K - 1)); k += 4, buf += 4) {
    const uint32_t va = mt_read_s8x4(xa + k), vb = mt_read_s8x4(xb + k);
    buf[0] = __sxtab16(off2, (int32_t)va);
    buf[1] = __sxtab16(off2, (int32_t)((va >> 8) | (va << 24)));
    buf[2] = __sxtab16(off2, (int32_t)vb);
    buf[3] = __sxtab16(off2, (int32_t)((vb >> 8) | (vb << 24)));
  }
#endif /* C1X1_DSP */
  for (; k < cin; k++, buf += 2) {
    buf[0] = xa[k] + x_off;
    buf[1] = xb[k] + x_off;
  }
}

/* rq(acc) on 32 bits (exact when it fits int32, the domain): for shift > 32 only the high
 * word of acc * mult counts (mt_requantize); for shift <= 32, with acc * mult = hi * 2^32 + lo,
 * (acc * mult + 2^(s-1)) >> s == hi * 2^(32-s) + ((lo >> (s-1)) + 1) >> 1 (mod 2^32). */
static MT_ALWAYS_INLINE int32_t c1x1_rq(uint32_t acc, int32_t mult, int32_t shift, int fast)
{
  if (fast || shift > 32) {
    const int32_t rnd = 1 << (shift - 33);
#if C1X1_DSP
    int32_t v; /* SMMLA: rnd + the high word of acc * mult, one instruction */
    __asm__("smmla %0, %1, %2, %3" : "=r"(v) : "r"(acc), "r"(mult), "r"(rnd));
    return v >> (shift - 32);
#else /* !C1X1_DSP */
    return ((int32_t)(((int64_t)mt_wrap_s32(acc) * mult) >> 32) + rnd) >> (shift - 32);
#endif /* C1X1_DSP */
  }
  const int64_t prod = (int64_t)mt_wrap_s32(acc) * mult;
  const uint32_t hi = (uint32_t)(prod >> 32), lo = (uint32_t)prod;
  return mt_wrap_s32((hi << (32 - shift)) + (((lo >> (shift - 1)) + 1u) >> 1));
}

/* The output stage's constants: zero point and activation range. */
typedef struct {
  int32_t zp, lo, hi;
} c1x1_act;

/* ya, yb = clamp(rq(a or b) + zp, lo, hi) of one channel. `fast`: every shift is above 32 and
 * the range is [-128, 127] (one SSAT where the core has it). */
static MT_ALWAYS_INLINE void c1x1_out2(uint32_t a, uint32_t b, int32_t mult, int32_t shift,
                                       c1x1_act act, int fast, int8_t *ya, int8_t *yb)
{
  /* + zp wraps (outside the numerics domain rq may be near INT32_MIN: some int8 value, no UB) */
  int32_t va = mt_wrap_s32((uint32_t)c1x1_rq(a, mult, shift, fast) + (uint32_t)act.zp);
  int32_t vb = mt_wrap_s32((uint32_t)c1x1_rq(b, mult, shift, fast) + (uint32_t)act.zp);
#if defined(__ARM_FEATURE_SAT)
  if (fast) {
    *ya = (int8_t)__ssat(va, 8);
    *yb = (int8_t)__ssat(vb, 8);
    return;
  }
#endif /* __ARM_FEATURE_SAT */
  *ya = (int8_t)(va < act.lo ? act.lo : (va > act.hi ? act.hi : va));
  *yb = (int8_t)(vb < act.lo ? act.lo : (vb > act.hi ? act.hi : vb));
}

#define C1X1_CHUNK 64 /* output channels whose accumulators are kept (512 B of stack) */

/* Output channels [0, Cout) of the pixel pair in buf, stored at ya and yb, in chunks: the
 * sums of every channel pair (an odd last channel paired with itself), then the output stage
 * (channel c's accumulators at acc[2c], acc[2c + 1]). */
static MT_ALWAYS_INLINE void c1x1_pair(const mt_conv1x1 *p, const int32_t *buf, int8_t *ya,
                                       int8_t *yb, int fast)
{
  uint32_t acc[2 * C1X1_CHUNK];
  const c1x1_act act = {p->out_zp, fast ? MT_S8_MIN : p->act_min, fast ? MT_S8_MAX : p->act_max};
  const int32_t cin = p->cin, cout = p->cout;
  const int32_t *bias = p->bias, *mult = p->mult, *shift = p->shift;
  for (int32_t o0 = 0; o0 < cout; o0 += C1X1_CHUNK) {
    const int32_t nc = cout - o0 < C1X1_CHUNK ? cout - o0 : C1X1_CHUNK;
    const int8_t *w = p->w + (size_t)o0 * (size_t)cin;
    c1x1_dots(buf, w, cin, nc >> 1, 0, bias + o0, acc);
    if (nc & 1) {
      const int32_t last[2] = {bias[o0 + nc - 1], bias[o0 + nc - 1]};
      c1x1_dots(buf, w + (size_t)(nc - 1) * (size_t)cin, cin, 1, 1, last, acc + 2 * (nc - 1));
    }
    for (int32_t c = 0; c < nc; c++) {
      int8_t *a = ya + o0 + c, *b = yb + o0 + c, va, vb;
      if (!fast && p->add != NULL) { /* the residual add: each byte once (b may be a) */
        c1x1_out2(acc[2 * c], acc[2 * c + 1], mult[o0 + c], shift[o0 + c], act, 0, &va, &vb);
        mt_add_stage_store(p->add, va, a);
        if (b != a) {
          mt_add_stage_store(p->add, vb, b);
        }
        continue;
      }
      c1x1_out2(acc[2 * c], acc[2 * c + 1], mult[o0 + c], shift[o0 + c], act, fast, a, b);
    }
  }
}

static MT_NOINLINE void c1x1_pair_fast(const mt_conv1x1 *p, const int32_t *buf, int8_t *ya,
                                       int8_t *yb)
{
  c1x1_pair(p, buf, ya, yb, 1);
}

static MT_NOINLINE void c1x1_pair_any(const mt_conv1x1 *p, const int32_t *buf, int8_t *ya,
                                      int8_t *yb)
{
  c1x1_pair(p, buf, ya, yb, 0);
}

static int conv1x1_pairs(const mt_conv1x1 *p)
{
  int32_t buf[C1X1_BUF];
  if (p->cin > C1X1_BUF / 2 || p->cout < 1) {
    return 0;
  }
  int fast = p->add == NULL && p->act_min == MT_S8_MIN && p->act_max == MT_S8_MAX;
  for (int32_t o = 0; o < p->cout; o++) {
    fast &= p->shift[o] > 32;
  }
  c1x1_cursor c = {p->x, 0, 0};
  const int32_t npx = p->batch * p->ho * p->wo;
  int8_t *y = p->y;
  for (int32_t q = 0; q < npx; q += 2, y += 2 * (size_t)p->cout) {
    const int8_t *xa = c1x1_next(p, &c), *xb = q + 1 < npx ? c1x1_next(p, &c) : xa;
    c1x1_unpack(xa, xb, p->cin, p->x_off, buf);
    int8_t *yb = q + 1 < npx ? y + p->cout : y;
    if (fast) {
      c1x1_pair_fast(p, buf, y, yb);
    } else {
      c1x1_pair_any(p, buf, y, yb);
    }
  }
  return 1;
}
#endif /* MT_MVE */

static int conv1x1_run(const mt_conv1x1 *p)
{
#if MT_MVE
  return conv1x1_mve(p);
#else /* !MT_MVE */
  return conv1x1_pairs(p);
#endif /* MT_MVE */
}

#endif /* MT_CONV_1X1_H */
