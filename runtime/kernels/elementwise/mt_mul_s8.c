/*
 * mt_mul_s8.c - element-wise y = clamp(rq((a - a_zp) * (b - b_zp)) + out_zp), numpy broadcasting
 * (mt_bcast.h: each run is the same-shape loop, or one over an operand times the other's
 * constant b - b_zp); y may be a or b (in place). |(a - a_zp) * (b - b_zp)| <= 255 * 255 < 2^16.
 *
 * Fast path, for shifts 18..54, exact on every ISA level: with p' = p << L (L = 33 - s <= 15
 * for s <= 32, else 0; p' fits int32) and k = s - 32 + L, only the high word h of p' * mult
 * matters (mt_requantize), and rq + zp = (h + 2^(k-1) + zp * 2^k) >> k (|h| <= 2^30, k <= 22:
 * no overflow): MLA + SUB + MUL, then one SMMLA and one shift. MVE runs the same on four int32
 * lanes (one tail-predicated loop of eleven instructions per four elements) with the doubling
 * VQDMLASH, hence L = 32 - s and k = s - 31 + L there. Other scales: the general path.
 */
#include "mt_bcast.h"
#include "mt_binary16.h" /* int16 operands: mt_mul_s16 */
#include "mt_kernels.h"

/* Armv7-M / Armv8-M Mainline scalar instructions (SSAT, SMMLA with DSP), unless -DMT_NO_SIMD */
#if defined(__ARM_FEATURE_SAT) && __ARM_ARCH_ISA_THUMB == 2 && !defined(MT_NO_SIMD)
#define MUL_T2 1
#else /* no SSAT, Thumb-1 or MT_NO_SIMD */
#define MUL_T2 0
#endif /* __ARM_FEATURE_SAT */

#if MT_MVE
/* The fast path on four lanes: y[i] for i < n (n > 0); reads four lanes before writing them. */
static MT_NOINLINE void mul_fast_mve(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                     const int32_t *at)
{
  const int32_t s = at[MT_MUL_SHIFT], l = s <= 31 ? 32 - s : 0, k = s - 31 + l, nk = -k;
  const int32_t ca = -at[MT_MUL_A_ZP] * (1 << l), zb = at[MT_MUL_B_ZP];
  const int32_t co = (1 << (k - 1)) + at[MT_MUL_OUT_ZP] * (1 << k);
  const int32x4_t ka = vdupq_n_s32(1 << l), m = vdupq_n_s32(at[MT_MUL_MULT]);
  const int32x4_t lo = vdupq_n_s32(at[MT_MUL_ACT_MIN]), hi = vdupq_n_s32(at[MT_MUL_ACT_MAX]);
  /* q0 = ((a - a_zp) << l) * (b - b_zp); q0 = (2 * q0 * m + (co << 32)) >> 32 >> k (no
   * saturation: |2 * q0 * m| < 2^62 and the sum's high word fits) */
  /* clang-format off */
  __asm__ volatile("   dlstp.32 lr, %[n]\n"
                   "1: vldrb.s32 q0, [%[a]], #4\n"
                   "   vldrb.s32 q1, [%[b]], #4\n"
                   "   vmlas.s32 q0, %q[ka], %[ca]\n"
                   "   vsub.i32 q1, q1, %[zb]\n"
                   "   vmul.i32 q0, q0, q1\n"
                   "   vqdmlash.s32 q0, %q[m], %[co]\n"
                   "   vshl.s32 q0, %[nk]\n"
                   "   vmax.s32 q0, q0, %q[lo]\n"
                   "   vmin.s32 q0, q0, %q[hi]\n"
                   "   vstrb.32 q0, [%[y]], #4\n"
                   "   letp lr, 1b\n"
                   : [a] "+r"(a), [b] "+r"(b), [y] "+r"(y)
                   : [n] "r"(n), [ka] "w"(ka), [m] "w"(m), [lo] "w"(lo), [hi] "w"(hi),
                     [ca] "r"(ca), [zb] "r"(zb), [co] "r"(co), [nk] "r"(nk)
                   : "q0", "q1", "lr", "memory");
  /* clang-format on */
}
/* The fast path with one operand's b - b_zp a constant d: x walks the run with zero point zx. */
static MT_NOINLINE void mul_const_fast_mve(const int8_t *x, int8_t *y, uint32_t n, int32_t zx,
                                           int32_t d, const int32_t *at)
{
  const int32_t s = at[MT_MUL_SHIFT], l = s <= 31 ? 32 - s : 0, k = s - 31 + l, nk = -k;
  const int32_t cx = -zx * (1 << l), co = (1 << (k - 1)) + at[MT_MUL_OUT_ZP] * (1 << k);
  const int32x4_t kx = vdupq_n_s32(1 << l), m = vdupq_n_s32(at[MT_MUL_MULT]);
  const int32x4_t lo = vdupq_n_s32(at[MT_MUL_ACT_MIN]), hi = vdupq_n_s32(at[MT_MUL_ACT_MAX]);
  /* mul_fast_mve's lanes with b - b_zp the constant d (no second load) */
  /* clang-format off */
  __asm__ volatile("   dlstp.32 lr, %[n]\n"
                   "1: vldrb.s32 q0, [%[x]], #4\n"
                   "   vmlas.s32 q0, %q[kx], %[cx]\n"
                   "   vmul.i32 q0, q0, %[d]\n"
                   "   vqdmlash.s32 q0, %q[m], %[co]\n"
                   "   vshl.s32 q0, %[nk]\n"
                   "   vmax.s32 q0, q0, %q[lo]\n"
                   "   vmin.s32 q0, q0, %q[hi]\n"
                   "   vstrb.32 q0, [%[y]], #4\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [y] "+r"(y)
                   : [n] "r"(n), [kx] "w"(kx), [m] "w"(m), [lo] "w"(lo), [hi] "w"(hi),
                     [cx] "r"(cx), [d] "r"(d), [co] "r"(co), [nk] "r"(nk)
                   : "q0", "lr", "memory");
  /* clang-format on */
}
#else /* !MT_MVE */
/* acc + (x * m) >> 32, exact (64-bit product) */
static inline int32_t mul_mlah(int32_t acc, int32_t x, int32_t m)
{
#if MT_DSP
  int32_t r;
  __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(m), "r"(acc));
  return r;
#else /* !MT_DSP */
  return acc + (int32_t)(((int64_t)x * m) >> 32);
#endif /* MT_DSP */
}

/* The fast path, one element per step, clamped to int8 only (the caller applies act_min/max);
 * reads a[i], b[i] before writing y[i]. */
static MT_NOINLINE void mul_fast_scalar(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                        const int32_t *at)
{
  const int32_t s = at[MT_MUL_SHIFT], l = s <= 32 ? 33 - s : 0, k = s - 32 + l;
  int32_t ka = 1 << l;
  const int32_t ca = -at[MT_MUL_A_ZP] * ka, zb = at[MT_MUL_B_ZP], m = at[MT_MUL_MULT];
  const int32_t co = (1 << (k - 1)) + at[MT_MUL_OUT_ZP] * (1 << k);
  __asm__("" : "+r"(ka)); /* a multiply (MLA), not a shift and an add */
  for (uint32_t i = 0; i < n; i++) {
    int32_t v = mul_mlah(co, (a[i] * ka + ca) * (b[i] - zb), m) >> k;
#if MUL_T2
    __asm__("ssat %0, #8, %0" : "+r"(v));
#else /* !MUL_T2 */
    v = v < MT_S8_MIN ? MT_S8_MIN : (v > MT_S8_MAX ? MT_S8_MAX : v);
#endif /* MUL_T2 */
    y[i] = (int8_t)v;
  }
}
/* mul_fast_scalar with one operand's b - b_zp a constant d: x walks the run (zero point zx). */
static MT_NOINLINE void mul_const_fast_scalar(const int8_t *x, int8_t *y, uint32_t n, int32_t zx,
                                              int32_t d, const int32_t *at)
{
  const int32_t s = at[MT_MUL_SHIFT], l = s <= 32 ? 33 - s : 0, k = s - 32 + l;
  int32_t kx = 1 << l;
  const int32_t cx = -zx * kx, m = at[MT_MUL_MULT];
  const int32_t co = (1 << (k - 1)) + at[MT_MUL_OUT_ZP] * (1 << k);
  __asm__("" : "+r"(kx)); /* a multiply (MLA), not a shift and an add */
  for (uint32_t i = 0; i < n; i++) {
    int32_t v = mul_mlah(co, (x[i] * kx + cx) * d, m) >> k;
#if MUL_T2
    __asm__("ssat %0, #8, %0" : "+r"(v));
#else /* !MUL_T2 */
    v = v < MT_S8_MIN ? MT_S8_MIN : (v > MT_S8_MAX ? MT_S8_MAX : v);
#endif /* MUL_T2 */
    y[i] = (int8_t)v;
  }
}
#endif /* MT_MVE */

/* y[0..n) for one run of the broadcast walk (mt_bcast_fn); the attributes are checked. */
static void mul_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                    const int32_t *at)
{
  const int32_t a_zp = at[MT_MUL_A_ZP], b_zp = at[MT_MUL_B_ZP], out_zp = at[MT_MUL_OUT_ZP];
  const int32_t mult = at[MT_MUL_MULT], shift = at[MT_MUL_SHIFT];
  const int32_t lo = at[MT_MUL_ACT_MIN], hi = at[MT_MUL_ACT_MAX];
  const uint32_t sa = mode != MT_BCAST_A_CONST, sb = mode != MT_BCAST_B_CONST;
  uint32_t i = 0;
  if (shift >= 18 && shift <= 54) {
    const int32_t zx = sa ? a_zp : b_zp, d = sa ? b[0] - b_zp : a[0] - a_zp;
#if MT_MVE
    if (mode == MT_BCAST_SAME) {
      mul_fast_mve(a, b, y, n, at);
    } else {
      mul_const_fast_mve(sa ? a : b, y, n, zx, d, at);
    }
#else /* !MT_MVE */
    if (mode == MT_BCAST_SAME) {
      mul_fast_scalar(a, b, y, n, at);
    } else {
      mul_const_fast_scalar(sa ? a : b, y, n, zx, d, at);
    }
    for (; (lo > MT_S8_MIN || hi < MT_S8_MAX) && i < n; i++) {
      y[i] = (int8_t)(y[i] < lo ? lo : (y[i] > hi ? hi : y[i])); /* a fused activation */
    }
#endif /* MT_MVE */
    return;
  }
#if MT_MVE
  const int32x4_t m = vdupq_n_s32(mult), sh = vdupq_n_s32(32 - shift), sl = vdupq_n_s32(-shift);
  for (; mode == MT_BCAST_SAME && i < n; i += 4) { /* four lanes read before four are written */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t prod = vmulq_s32(vsubq_n_s32(vldrbq_z_s32(a + i, p), a_zp),
                                     vsubq_n_s32(vldrbq_z_s32(b + i, p), b_zp));
    vstrbq_p_s32(y + i, mt_requantize_v(prod, m, sh, sl, out_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) { /* reads a[i], b[i] before writing y[i]: in place is fine */
    y[i] = mt_requantize((a[i * sa] - a_zp) * (b[i * sb] - b_zp), mult, shift, out_zp, lo, hi);
  }
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
mt_status mt_mul_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_MUL_N_INPUTS, MT_MUL_N_OUTPUTS, MT_MUL_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (args->in[MT_MUL_IN_A].rec->dtype == MT_DTYPE_INT16) {
    return mt_mul_s16 != NULL ? mt_mul_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_MUL_IN_A], *bt = &args->in[MT_MUL_IN_B];
  const mt_tensor *yt = &args->out[MT_MUL_OUT_Y];
  const int32_t *at = args->attrs;
  const int32_t a_zp = at[MT_MUL_A_ZP], b_zp = at[MT_MUL_B_ZP], out_zp = at[MT_MUL_OUT_ZP];
  const int32_t mult = at[MT_MUL_MULT], shift = at[MT_MUL_SHIFT];
  mt_bcast bc;
  if (!mt_tensor_ok(at_, MT_DTYPE_INT8, at_->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_bcast_init(&bc, at_, bt, yt) ||
      !mt_zp_ok(a_zp) || !mt_zp_ok(b_zp) || !mt_zp_ok(out_zp) ||
      !mt_act_ok(at[MT_MUL_ACT_MIN], at[MT_MUL_ACT_MAX])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  /* the extreme products of (a - a_zp) * (b - b_zp), |p| <= 255 * 255: rq of each fits int32 */
  const int32_t a0 = MT_S8_MIN - a_zp, a1 = MT_S8_MAX - a_zp, b0 = MT_S8_MIN - b_zp;
  const int32_t b1 = MT_S8_MAX - b_zp, p0 = a0 * b0, p1 = a0 * b1, p2 = a1 * b0, p3 = a1 * b1;
  const int32_t p_lo = p0 < p1 ? p0 : p1, p_lo2 = p2 < p3 ? p2 : p3;
  const int32_t p_hi = p0 > p1 ? p0 : p1, p_hi2 = p2 > p3 ? p2 : p3;
  if (!mt_rq_range_ok(p_lo < p_lo2 ? p_lo : p_lo2, p_hi > p_hi2 ? p_hi : p_hi2, mult, shift)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at_->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                mul_run, at);
  return MT_STATUS_OK;
}
