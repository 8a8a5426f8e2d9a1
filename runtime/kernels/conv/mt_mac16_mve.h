/*
 * mt_mac16_mve.h - the MVE (Helium) helpers of the int16 (a16w8) MAC kernels (mt_mac16.h):
 *
 *   mt_dot16x4_mve  four weight rows against one int16 run, int32 sums: VMLADAVA.S16 (eight
 *                   int16 x int16 products per instruction) on x and the int8 weights widened
 *                   by VLDRB.S16, each x load feeding four rows; 10 instructions per 8 elements
 *   mt_wabs_mve     sum |w| of an int8 row (VABAV): the per-call int32 bound of mt_mac16_form
 *   mt_out16x4_mve  the 32-bit output stage of four channels on int32 lanes, int16 stores
 *   mt_dot16x2x3_mve  three weight rows against two pixels' runs: each weight load feeds two
 *                   VMLADAVA, 12 instructions per 8 elements (48 MACs)
 *   mt_mac16_channels_mve / mt_mac16_channels2_mve  every channel of one / two pixels
 *
 * Included by mt_mac16.h after mt_stage16.
 *
 * The int32 sums are exact where mt_mac16.h uses them: from the bias when the call's bound
 * holds (every partial sum within int32), else from 0 over at most MT_MAC16_CHUNK products.
 * Empty without MT_MVE.
 */
#ifndef MT_MAC16_MVE_H
#define MT_MAC16_MVE_H

#include "mt_kernel_util.h"

#if MT_MVE
/* s_r += sum_{k < n} x[k] * w_r[k] for r < 4 (n > 0), returned as lanes 0..3. Wrapping int32
 * adds (VMLADAVA): exact when no true partial sum leaves int32. The widening loads take low base
 * registers ("l"), the accumulators even ones ("Te"). */
static MT_ALWAYS_INLINE int32x4_t mt_dot16x4_mve(const int16_t *x, const int8_t *w0,
                                                 const int8_t *w1, const int8_t *w2,
                                                 const int8_t *w3, uint32_t n, int32_t s0,
                                                 int32_t s1, int32_t s2, int32_t s3)
{
  /* clang-format off */
  __asm__ volatile("   dlstp.16 lr, %[n]\n"
                   "1: vldrh.s16 q0, [%[x]], #16\n"
                   "   vldrb.s16 q1, [%[w0]], #8\n"
                   "   vmladava.s16 %[s0], q0, q1\n"
                   "   vldrb.s16 q2, [%[w1]], #8\n"
                   "   vmladava.s16 %[s1], q0, q2\n"
                   "   vldrb.s16 q1, [%[w2]], #8\n"
                   "   vmladava.s16 %[s2], q0, q1\n"
                   "   vldrb.s16 q2, [%[w3]], #8\n"
                   "   vmladava.s16 %[s3], q0, q2\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [w0] "+l"(w0), [w1] "+l"(w1), [w2] "+l"(w2), [w3] "+l"(w3),
                     [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3)
                   : [n] "r"(n)
                   : "q0", "q1", "q2", "lr", "memory");
  /* clang-format on */
  return mt_lanes4_mve(s0, s1, s2, s3);
}

/* sum_{k < n} |w[k]| (n >= 0), 16 weights per VABAV. */
static inline uint32_t mt_wabs_mve(const int8_t *w, uint32_t n)
{
  uint32_t s = 0;
  for (uint32_t k = 0; k < n; k += 16) {
    const mve_pred16_t p = vctp8q(n - k);
    s = vabavq_p_s8(s, vldrbq_z_s8(w + k, p), vdupq_n_s8(0), p);
  }
  return s;
}

/* y[j] = clamp(rq(acc[j], mult[j], shift[j]), lo, hi) for j < n <= 4, acc int32 lanes, every
 * shift in [17, 46] (the 32-bit form, docs/numerics.md section 6): VMULH by mult * 2^16 gives
 * floor(acc * mult / 2^16), VRSHL by 16 - shift the rounding shift. Lanes >= n are not stored. */
static inline void mt_out16x4_mve(int32x4_t acc, const int32_t *mult, const int32_t *shift,
                                  int32_t n, int32_t lo, int32_t hi, int16_t *y)
{
  const mve_pred16_t p = vctp32q((uint32_t)n);
  const int32x4_t m = vshlq_n_s32(vldrwq_z_s32(mult, p), 16);
  const int32x4_t r =
      vrshlq_s32(vmulhq_s32(acc, m), vsubq_s32(vdupq_n_s32(16), vldrwq_z_s32(shift, p)));
  vstrhq_p_s32(y, vminq_s32(vmaxq_s32(r, vdupq_n_s32(lo)), vdupq_n_s32(hi)), p);
}

/* The fast form's channels [0, n_c) of one pixel (window x of n > 0 elements, outputs y): four
 * rows per mt_dot16x4_mve pass; a last group of fewer rows repeats row 0 and stores its lanes. */
static MT_NOINLINE void mt_mac16_channels_mve(const mt_stage16 *s, const int16_t *x,
                                              const int8_t *w, size_t ws, uint32_t n, int32_t n_c,
                                              int16_t *y)
{
  const int64_t *b = s->bias;
  for (int32_t o = 0; o < n_c; o += 4) {
    const int32_t nr = n_c - o < 4 ? n_c - o : 4;
    const int8_t *w0 = w + (size_t)o * ws, *w1 = nr > 1 ? w0 + ws : w0;
    const int8_t *w2 = nr > 2 ? w0 + 2 * ws : w0, *w3 = nr > 3 ? w0 + 3 * ws : w0;
    mt_out16x4_mve(mt_dot16x4_mve(x, w0, w1, w2, w3, n, (int32_t)b[o],
                                  nr > 1 ? (int32_t)b[o + 1] : 0, nr > 2 ? (int32_t)b[o + 2] : 0,
                                  nr > 3 ? (int32_t)b[o + 3] : 0),
                   s->mult + o, s->shift + o, nr, s->lo, s->hi, y + o);
  }
}

#if defined(__OPTIMIZE__) /* -O0 keeps r7 as the frame pointer: too few registers */
/* The two pixels' sums of three weight rows (n > 0): a_r += sum_k xa[k] * w_r[k], b_r likewise
 * with xb; each weight load feeds both pixels, 12 instructions per 8 elements (48 MACs). Returns
 * (a0, a1, a2, a1) in *va and (b0, b1, b2, b1) in *vb. */
static MT_ALWAYS_INLINE void mt_dot16x2x3_mve(const int16_t *xa, const int16_t *xb,
                                              const int8_t *w0, const int8_t *w1, const int8_t *w2,
                                              uint32_t n, int32_t s0, int32_t s1, int32_t s2,
                                              int32x4_t *va, int32x4_t *vb)
{
  int32_t a0 = s0, a1 = s1, a2 = s2, b0 = s0, b1 = s1, b2 = s2;
  register uint32_t count __asm__("lr") = n; /* one register fewer: DLSTP LR, LR */
  int32x4_t ra, rb;
  /* clang-format off */
  __asm__ volatile("   dlstp.16 lr, %[n]\n"
                   "1: vldrh.s16 q0, [%[xa]], #16\n"
                   "   vldrh.s16 q1, [%[xb]], #16\n"
                   "   vldrb.s16 q2, [%[w0]], #8\n"
                   "   vmladava.s16 %[a0], q0, q2\n"
                   "   vmladava.s16 %[b0], q1, q2\n"
                   "   vldrb.s16 q3, [%[w1]], #8\n"
                   "   vmladava.s16 %[a1], q0, q3\n"
                   "   vmladava.s16 %[b1], q1, q3\n"
                   "   vldrb.s16 q2, [%[w2]], #8\n"
                   "   vmladava.s16 %[a2], q0, q2\n"
                   "   vmladava.s16 %[b2], q1, q2\n"
                   "   letp lr, 1b\n"
                   "   vmov %q[ra][2], %q[ra][0], %[a0], %[a2]\n"
                   "   vmov %q[ra][3], %q[ra][1], %[a1], %[a1]\n"
                   "   vmov %q[rb][2], %q[rb][0], %[b0], %[b2]\n"
                   "   vmov %q[rb][3], %q[rb][1], %[b1], %[b1]\n"
                   : [xa] "+r"(xa), [xb] "+r"(xb), [w0] "+l"(w0), [w1] "+l"(w1), [w2] "+l"(w2),
                     [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [b0] "+Te"(b0),
                     [b1] "+Te"(b1), [b2] "+Te"(b2), [ra] "=&w"(ra), [rb] "=&w"(rb),
                     [n] "+r"(count)
                   :
                   : "q0", "q1", "q2", "q3", "memory");
  /* clang-format on */
  *va = ra;
  *vb = rb;
}

/* The fast form's channels [o, n_c) of two pixels (windows xa, xb of n > 0 elements each,
 * outputs ya, yb): three rows per mt_dot16x2x3_mve pass, one multiplier load for both pixels. */
static void mt_mac16_channels2_c(const mt_stage16 *s, const int16_t *xa, const int16_t *xb,
                                 const int8_t *w, size_t ws, uint32_t n, int32_t o, int32_t n_c,
                                 int16_t *ya, int16_t *yb)
{
  const int32x4_t lo = vdupq_n_s32(s->lo), hi = vdupq_n_s32(s->hi), c16 = vdupq_n_s32(16);
  const int64_t *b = s->bias;
  for (; o < n_c; o += 3) {
    const int32_t nr = n_c - o < 3 ? n_c - o : 3;
    const int8_t *w0 = w + (size_t)o * ws, *w1 = nr > 1 ? w0 + ws : w0;
    const int8_t *w2 = nr > 2 ? w0 + 2 * ws : w0;
    const mve_pred16_t p = vctp32q((uint32_t)nr);
    int32x4_t va, vb;
    mt_dot16x2x3_mve(xa, xb, w0, w1, w2, n, (int32_t)b[o], nr > 1 ? (int32_t)b[o + 1] : 0,
                     nr > 2 ? (int32_t)b[o + 2] : 0, &va, &vb);
    const int32x4_t m = vshlq_n_s32(vldrwq_z_s32(s->mult + o, p), 16);
    const int32x4_t sh = vsubq_s32(c16, vldrwq_z_s32(s->shift + o, p));
    vstrhq_p_s32(ya + o, vminq_s32(vmaxq_s32(vrshlq_s32(vmulhq_s32(va, m), sh), lo), hi), p);
    vstrhq_p_s32(yb + o, vminq_s32(vmaxq_s32(vrshlq_s32(vmulhq_s32(vb, m), sh), lo), hi), p);
  }
}

/* What the group loop of mt_mac16_channels2_mve reads and advances, word by word (the asm
 * relies on this layout). */
typedef struct {
  const int16_t *xa, *xb;
  uint32_t n;
  const int8_t *w; /* the group's first row; the asm advances it by 3 * ws */
  size_t ws;
  const int64_t *bias;
  const int32_t *mult, *shift;
  int16_t *ya, *yb;
  uint32_t groups;
} mt_mac16_g3;

/* Every full group of three channels of two pixels in one asm loop (gcc spills the state of
 * this loop written in C): per group LDM of three int64 biases (their low words are the int32
 * accumulators, r0 / r2 / r4, copied for the second pixel), the three row pointers, the
 * mt_dot16x2x3_mve loop, the output stage of both pixels on lanes 0..2 (VCTP 3). */
static MT_NOINLINE void mt_mac16_g3_mve(mt_mac16_g3 *g, int32x4_t lo, int32x4_t hi, int32x4_t c16)
{
  register mt_mac16_g3 *st __asm__("r11") = g;
  /* clang-format off */
  __asm__ volatile("2: ldr r12, [r11, #20]\n"
                   "   ldm r12!, {r0, r1, r2, r3, r4, r5}\n"
                   "   str r12, [r11, #20]\n"
                   "   mov r6, r0\n"
                   "   mov r8, r2\n"
                   "   mov r10, r4\n"
                   "   ldr r1, [r11, #12]\n"
                   "   ldr r12, [r11, #16]\n"
                   "   add r3, r1, r12\n"
                   "   add r5, r3, r12\n"
                   "   add r12, r5, r12\n"
                   "   str r12, [r11, #12]\n"
                   "   ldrd r7, r9, [r11]\n"
                   "   ldr lr, [r11, #8]\n"
                   "   dlstp.16 lr, lr\n"
                   "1: vldrh.s16 q0, [r7], #16\n"
                   "   vldrh.s16 q1, [r9], #16\n"
                   "   vldrb.s16 q2, [r1], #8\n"
                   "   vmladava.s16 r0, q0, q2\n"
                   "   vmladava.s16 r6, q1, q2\n"
                   "   vldrb.s16 q3, [r3], #8\n"
                   "   vmladava.s16 r2, q0, q3\n"
                   "   vmladava.s16 r8, q1, q3\n"
                   "   vldrb.s16 q2, [r5], #8\n"
                   "   vmladava.s16 r4, q0, q2\n"
                   "   vmladava.s16 r10, q1, q2\n"
                   "   letp lr, 1b\n"
                   "   vmov q0[2], q0[0], r0, r4\n"
                   "   vmov q0[3], q0[1], r2, r2\n"
                   "   vmov q1[2], q1[0], r6, r10\n"
                   "   vmov q1[3], q1[1], r8, r8\n"
                   "   ldrd r0, r1, [r11, #24]\n"
                   "   movs r2, #3\n"
                   "   vctp.32 r2\n"
                   "   vpstt\n"
                   "   vldrwt.u32 q2, [r0], #12\n"
                   "   vldrwt.u32 q3, [r1], #12\n"
                   "   strd r0, r1, [r11, #24]\n"
                   "   vshl.i32 q2, q2, #16\n"
                   "   vsub.i32 q3, %q[c16], q3\n"
                   "   vmulh.s32 q0, q0, q2\n"
                   "   vmulh.s32 q1, q1, q2\n"
                   "   vrshl.s32 q0, q0, q3\n"
                   "   vrshl.s32 q1, q1, q3\n"
                   "   vmax.s32 q0, q0, %q[lo]\n"
                   "   vmax.s32 q1, q1, %q[lo]\n"
                   "   vmin.s32 q0, q0, %q[hi]\n"
                   "   vmin.s32 q1, q1, %q[hi]\n"
                   "   ldrd r0, r1, [r11, #32]\n"
                   "   vpstt\n"
                   "   vstrht.32 q0, [r0], #6\n"
                   "   vstrht.32 q1, [r1], #6\n"
                   "   strd r0, r1, [r11, #32]\n"
                   "   ldr r0, [r11, #40]\n"
                   "   subs r0, #1\n"
                   "   str r0, [r11, #40]\n"
                   "   bne 2b\n"
                   :
                   : "r"(st), [lo] "w"(lo), [hi] "w"(hi), [c16] "w"(c16)
                   : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r12",
                     "lr", "q0", "q1", "q2", "q3", "cc", "memory");
  /* clang-format on */
}

/* The fast form's channels [0, n_c) of two pixels: full groups of three in mt_mac16_g3_mve,
 * the rest in mt_mac16_channels2_c. */
static MT_NOINLINE void mt_mac16_channels2_mve(const mt_stage16 *s, const int16_t *xa,
                                               const int16_t *xb, const int8_t *w, size_t ws,
                                               uint32_t n, int32_t n_c, int16_t *ya, int16_t *yb)
{
  if (n_c >= 3) {
    mt_mac16_g3 g = {xa, xb, n, w, ws, s->bias, s->mult, s->shift, ya, yb, (uint32_t)(n_c / 3)};
    mt_mac16_g3_mve(&g, vdupq_n_s32(s->lo), vdupq_n_s32(s->hi), vdupq_n_s32(16));
  }
  mt_mac16_channels2_c(s, xa, xb, w, ws, n, n_c / 3 * 3, n_c, ya, yb);
}
#endif /* __OPTIMIZE__ */
#endif /* MT_MVE */

#endif /* MT_MAC16_MVE_H */
