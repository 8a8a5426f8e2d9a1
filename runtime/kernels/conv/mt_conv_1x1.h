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
 * feeds two MACs. An odd last pixel or channel is paired with itself (computed twice, stored
 * twice to the same byte). Cin above the buffer goes to the general path.
 */
#ifndef MT_CONV_1X1_H
#define MT_CONV_1X1_H

#include "mt_kernel_util.h"

typedef struct {
  const int8_t *x, *w; /* x: (N, H, W, Cin); w: (Cout, Cin) */
  const int32_t *bias, *mult, *shift;
  int8_t *y; /* (N, Ho, Wo, Cout) */
  int32_t batch, h, w_in, cin, cout, ho, wo, stride_h, stride_w;
  int32_t x_off, out_zp, act_min, act_max;
} mt_conv1x1;

#if MT_MVE
#include "mt_conv_1x1_mve.h" /* conv1x1_mve */
#else /* !MT_MVE */
#if defined(__ARM_FEATURE_SAT)
#include <arm_acle.h> /* __ssat */
#endif /* __ARM_FEATURE_SAT */

/* Armv7-M / Armv8-M Mainline without DSP (Cortex-M3): the C variant's loop in asm */
#if !MT_DSP && defined(__ARM_ARCH_ISA_THUMB) && __ARM_ARCH_ISA_THUMB == 2 && \
    !defined(MT_NO_SIMD)
#define C1X1_T2 1
#else
#define C1X1_T2 0
#endif

#define C1X1_BUF 512 /* int32 words of unpacked input: two pixels of up to 256 channels (C) */

/* Where the output pixels' inputs are: the next one at x + (row + ox * stride_w) * Cin. */
typedef struct {
  const int8_t *row; /* input row of the current output row */
  int32_t ox, oy;
} c1x1_cursor;

static const int8_t *c1x1_next(const mt_conv1x1 *p, c1x1_cursor *c)
{
  const int8_t *px = c->row + (size_t)c->ox * (size_t)p->stride_w * (size_t)p->cin;
  const size_t x_row = (size_t)p->w_in * (size_t)p->cin;
  if (++c->ox == p->wo) {
    c->ox = 0;
    c->row += (size_t)p->stride_h * x_row;
    if (++c->oy == p->ho) { /* next image: skip the input rows below the last window */
      c->oy = 0;
      c->row += (size_t)(p->h - p->ho * p->stride_h) * x_row;
    }
  }
  return px;
}

/* buf = pixels xa, xb (Cin bytes each) plus x_off as the dot loops read them. DSP: per four
 * channels k, the halfword pairs (xa[k], xa[k+2]), (xa[k+1], xa[k+3]), then the same of xb
 * (the lanes SXTB16 / SXTB16 ROR #8 make of a weight word); C and the last Cin % 4 channels on
 * DSP: per channel, the words xa[k], xb[k]. */
static void c1x1_unpack(const int8_t *xa, const int8_t *xb, int32_t cin, int32_t x_off,
                        int32_t *buf)
{
  int32_t k = 0;
#if MT_DSP
  const int32_t off2 = (int32_t)(((uint32_t)x_off << 16) | ((uint32_t)x_off & 0xFFFFu));
  for (; cin - k >= 4; k += 4, buf += 4) {
    const uint32_t va = mt_read_s8x4(xa + k), vb = mt_read_s8x4(xb + k);
    buf[0] = __sxtab16(off2, (int32_t)va);
    buf[1] = __sxtab16(off2, (int32_t)((va >> 8) | (va << 24)));
    buf[2] = __sxtab16(off2, (int32_t)vb);
    buf[3] = __sxtab16(off2, (int32_t)((vb >> 8) | (vb << 24)));
  }
#endif /* MT_DSP */
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
  const int64_t prod = (int64_t)mt_wrap_s32(acc) * mult;
  const int32_t hi = (int32_t)(prod >> 32);
  if (fast || shift > 32) {
    return (hi + (1 << (shift - 33))) >> (shift - 32);
  }
  const uint32_t lo = (uint32_t)prod;
  return mt_wrap_s32(((uint32_t)hi << (32 - shift)) + (((lo >> (shift - 1)) + 1u) >> 1));
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
  int32_t va = c1x1_rq(a, mult, shift, fast) + act.zp;
  int32_t vb = c1x1_rq(b, mult, shift, fast) + act.zp;
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

/* Output channels [0, Cout) of the pixel pair in buf, stored at ya and yb. */
static MT_ALWAYS_INLINE void c1x1_pair(const mt_conv1x1 *p, const int32_t *buf, int8_t *ya,
                                       int8_t *yb, int fast)
{
  const int32_t cin = p->cin, cout = p->cout;
  const int32_t *bias = p->bias, *mult = p->mult, *shift = p->shift;
  const c1x1_act act = {p->out_zp, fast ? MT_S8_MIN : p->act_min, fast ? MT_S8_MAX : p->act_max};
  const int8_t *w0 = p->w;
  for (int32_t o = 0; o < cout; o += 2, w0 += 2 * (size_t)cin) {
    const int32_t o1 = o + 1 < cout ? o + 1 : o;
    const int8_t *w1 = w0 + (size_t)(o1 - o) * (size_t)cin;
    uint32_t a0 = (uint32_t)bias[o], a1 = (uint32_t)bias[o1], b0 = a0, b1 = a1;
    const int32_t *xp = buf;
    int32_t k = 0;
#if MT_DSP
    if (cin >= 4) { /* in asm, every operand in a fixed register: gcc finds no 14 itself */
      register const int32_t *xr __asm__("r4") = xp, *end __asm__("r5") = xp + (cin & ~3);
      register const int8_t *wa __asm__("r6") = w0, *wb __asm__("r7") = w1;
      register uint32_t ra0 __asm__("r8") = a0, ra1 __asm__("r9") = a1;
      register uint32_t rb0 __asm__("r10") = b0, rb1 __asm__("r11") = b1;
      register uint32_t t __asm__("r12"), u __asm__("lr");
      __asm__ volatile("1: ldm %[xp]!, {r0, r1, r2, r3}\n"
                       "   ldr %[t], [%[wa]], #4\n"
                       "   sxtb16 %[u], %[t]\n"
                       "   sxtb16 %[t], %[t], ror #8\n"
                       "   smlad %[a0], r0, %[u], %[a0]\n"
                       "   smlad %[a0], r1, %[t], %[a0]\n"
                       "   smlad %[b0], r2, %[u], %[b0]\n"
                       "   smlad %[b0], r3, %[t], %[b0]\n"
                       "   ldr %[t], [%[wb]], #4\n"
                       "   sxtb16 %[u], %[t]\n"
                       "   sxtb16 %[t], %[t], ror #8\n"
                       "   smlad %[a1], r0, %[u], %[a1]\n"
                       "   smlad %[a1], r1, %[t], %[a1]\n"
                       "   smlad %[b1], r2, %[u], %[b1]\n"
                       "   smlad %[b1], r3, %[t], %[b1]\n"
                       "   cmp %[xp], %[end]\n"
                       "   bne 1b\n"
                       : [xp] "+r"(xr), [wa] "+r"(wa), [wb] "+r"(wb), [a0] "+r"(ra0),
                         [a1] "+r"(ra1), [b0] "+r"(rb0), [b1] "+r"(rb1), [t] "=&r"(t),
                         [u] "=&r"(u)
                       : [end] "r"(end)
                       : "r0", "r1", "r2", "r3", "cc", "memory");
      xp = xr;
      a0 = ra0;
      a1 = ra1;
      b0 = rb0;
      b1 = rb1;
      k = cin & ~3;
    }
#elif C1X1_T2
    if (cin >= 2) { /* two channels per step: LDM of four words, LDRSB + two MLA per weight */
      register const int32_t *xr __asm__("r4") = xp, *end __asm__("r5") = xp + 2 * (cin & ~1);
      register const int8_t *wa __asm__("r6") = w0, *wb __asm__("r7") = w1;
      register uint32_t ra0 __asm__("r8") = a0, ra1 __asm__("r9") = a1;
      register uint32_t rb0 __asm__("r10") = b0, rb1 __asm__("r11") = b1;
      register int32_t t __asm__("r12");
      __asm__ volatile("1: ldm %[xp]!, {r0, r1, r2, r3}\n"
                       "   ldrsb %[t], [%[wa]], #1\n"
                       "   mla %[a0], r0, %[t], %[a0]\n"
                       "   mla %[b0], r1, %[t], %[b0]\n"
                       "   ldrsb %[t], [%[wa]], #1\n"
                       "   mla %[a0], r2, %[t], %[a0]\n"
                       "   mla %[b0], r3, %[t], %[b0]\n"
                       "   ldrsb %[t], [%[wb]], #1\n"
                       "   mla %[a1], r0, %[t], %[a1]\n"
                       "   mla %[b1], r1, %[t], %[b1]\n"
                       "   ldrsb %[t], [%[wb]], #1\n"
                       "   mla %[a1], r2, %[t], %[a1]\n"
                       "   mla %[b1], r3, %[t], %[b1]\n"
                       "   cmp %[xp], %[end]\n"
                       "   bne 1b\n"
                       : [xp] "+r"(xr), [wa] "+r"(wa), [wb] "+r"(wb), [a0] "+r"(ra0),
                         [a1] "+r"(ra1), [b0] "+r"(rb0), [b1] "+r"(rb1), [t] "=&r"(t)
                       : [end] "r"(end)
                       : "r0", "r1", "r2", "r3", "cc", "memory");
      xp = xr;
      a0 = ra0;
      a1 = ra1;
      b0 = rb0;
      b1 = rb1;
      k = cin & ~1;
    }
#endif /* MT_DSP, C1X1_T2 */
    for (; k < cin; k++, xp += 2) {
      const int32_t v0 = w0[k], v1 = w1[k];
      a0 += (uint32_t)(xp[0] * v0);
      a1 += (uint32_t)(xp[0] * v1);
      b0 += (uint32_t)(xp[1] * v0);
      b1 += (uint32_t)(xp[1] * v1);
    }
    c1x1_out2(a0, b0, mult[o], shift[o], act, fast, ya + o, yb + o);
    c1x1_out2(a1, b1, mult[o1], shift[o1], act, fast, ya + o1, yb + o1);
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
  int fast = p->act_min == MT_S8_MIN && p->act_max == MT_S8_MAX;
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
#else
  return conv1x1_pairs(p);
#endif /* MT_MVE */
}

#endif /* MT_CONV_1X1_H */
