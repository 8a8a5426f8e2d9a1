/*
 * mt_add_s8.c - element-wise a + b with TOSA's int32 sequence: RESCALE both inputs to int32,
 * ADD, RESCALE to int8, clamp. Numpy broadcasting (mt_bcast.h): each run of y is the same-shape
 * loop, or a loop over one operand with the other's rescaled value a constant (a scalar or a
 * column operand). y may be a or b (in place).
 *
 * The attributes alone decide whether every int32 intermediate fits for every int8 input pair
 * (mt_addsub.h, the reference's domain check); if not, the kernel refuses the op before touching y.
 *
 * Fast path, for input shifts 9..31 and an output shift 33..54 (the compiler's left-shift scheme
 * gives about 12 and 48), exact on every ISA level:
 *   inputs   with |d| <= 255, d << (32 - s) fits int32 and rq(d, m, s) is the rounded high word
 *            of (d << (32 - s)) * m: one SMMULR (the second input: SMMLAR, which adds it to the
 *            first); d << (32 - s) = a * 2^(32-s) - zp * 2^(32-s), one MLA
 *   output   with s > 32 only the high word h of sum * m matters (mt_requantize), and
 *            rq + zp = (h + 2^(k-1) + zp * 2^k) >> k, k = s - 32 <= 22 (|h| <= 2^30: no
 *            overflow): one SMMLA and one shift
 * MVE runs the same on four int32 lanes, one tail-predicated loop of twelve instructions per
 * four elements; its doubling multiplies (VQRDMULH, VQRDMLAH, VQDMLASH) take the inputs
 * pre-shifted by 31 - s and the output shift as k = s - 31. Other scales take the general path
 * (mt_rq on 64 bits; MVE: mt_rq_v on four lanes). conv2d_add applies the same rule in its conv's
 * output stage (mt_kernel_add_stage.h).
 */
#include "mt_addsub.h"
#include "mt_bcast.h"
#include "mt_kernel_add_stage.h" /* the scalar multiply-high helpers, MT_ADD_T2 */
#include "mt_binary16.h" /* int16 operands: mt_add_s16 */

#if MT_MVE
/* The fast path on four lanes: y[i] for i < n (n > 0); reads four lanes before writing them. */
static MT_NOINLINE void add_fast_mve(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                     const int32_t *at)
{
  const int32_t sa = 31 - at[MT_ADD_A_SHIFT], sb = 31 - at[MT_ADD_B_SHIFT];
  const int32_t k = at[MT_ADD_OUT_SHIFT] - 31, nk = -k;
  const int32_t ca = -at[MT_ADD_A_ZP] * (1 << sa), cb = -at[MT_ADD_B_ZP] * (1 << sb);
  const int32_t co = (1 << (k - 1)) + at[MT_ADD_OUT_ZP] * (1 << k);
  const int32_t ma = at[MT_ADD_A_MULT], mb = at[MT_ADD_B_MULT];
  const int32x4_t ka = vdupq_n_s32(1 << sa), kb = vdupq_n_s32(1 << sb);
  const int32x4_t mo = vdupq_n_s32(at[MT_ADD_OUT_MULT]);
  const int32x4_t lo = vdupq_n_s32(at[MT_ADD_ACT_MIN]), hi = vdupq_n_s32(at[MT_ADD_ACT_MAX]);
  /* q0 = (a - a_zp) << sa, q1 = (b - b_zp) << sb; q0 = rq(a) + rq(b) (no saturation in the
   * domain); q0 = (2 * q0 * mo + (co << 32)) >> 32 >> k, which can saturate only where the
   * clamp to int8 decides anyway (k <= 23) */
  /* clang-format off */
  __asm__ volatile("   dlstp.32 lr, %[n]\n"
                   "1: vldrb.s32 q0, [%[a]], #4\n"
                   "   vldrb.s32 q1, [%[b]], #4\n"
                   "   vmlas.s32 q0, %q[ka], %[ca]\n"
                   "   vmlas.s32 q1, %q[kb], %[cb]\n"
                   "   vqrdmulh.s32 q0, q0, %[ma]\n"
                   "   vqrdmlah.s32 q0, q1, %[mb]\n"
                   "   vqdmlash.s32 q0, %q[mo], %[co]\n"
                   "   vshl.s32 q0, %[nk]\n"
                   "   vmax.s32 q0, q0, %q[lo]\n"
                   "   vmin.s32 q0, q0, %q[hi]\n"
                   "   vstrb.32 q0, [%[y]], #4\n"
                   "   letp lr, 1b\n"
                   : [a] "+r"(a), [b] "+r"(b), [y] "+r"(y)
                   : [n] "r"(n), [ka] "w"(ka), [kb] "w"(kb), [mo] "w"(mo), [lo] "w"(lo),
                     [hi] "w"(hi), [ca] "r"(ca), [cb] "r"(cb), [ma] "r"(ma), [mb] "r"(mb),
                     [co] "r"(co), [nk] "r"(nk)
                   : "q0", "q1", "lr", "memory");
  /* clang-format on */
}
/* The fast path with b's rescaled value c a constant: x is the other operand (zp, mult, shift). */
static MT_NOINLINE void add_const_fast_mve(const int8_t *x, int8_t *y, uint32_t n,
                                           const int32_t *xs, int32_t c, const int32_t *at)
{
  const int32_t sx = 31 - xs[2], k = at[MT_ADD_OUT_SHIFT] - 31, nk = -k, mx = xs[1];
  const int32_t co = (1 << (k - 1)) + at[MT_ADD_OUT_ZP] * (1 << k), cx = -xs[0] * (1 << sx);
  const int32x4_t kx = vdupq_n_s32(1 << sx), mo = vdupq_n_s32(at[MT_ADD_OUT_MULT]);
  const int32x4_t lo = vdupq_n_s32(at[MT_ADD_ACT_MIN]), hi = vdupq_n_s32(at[MT_ADD_ACT_MAX]);
  /* add_fast_mve's lanes with b's rescaled value the constant c (no second load) */
  /* clang-format off */
  __asm__ volatile("   dlstp.32 lr, %[n]\n"
                   "1: vldrb.s32 q0, [%[x]], #4\n"
                   "   vmlas.s32 q0, %q[kx], %[cx]\n"
                   "   vqrdmulh.s32 q0, q0, %[mx]\n"
                   "   vadd.i32 q0, q0, %[c]\n"
                   "   vqdmlash.s32 q0, %q[mo], %[co]\n"
                   "   vshl.s32 q0, %[nk]\n"
                   "   vmax.s32 q0, q0, %q[lo]\n"
                   "   vmin.s32 q0, q0, %q[hi]\n"
                   "   vstrb.32 q0, [%[y]], #4\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [y] "+r"(y)
                   : [n] "r"(n), [kx] "w"(kx), [mo] "w"(mo), [lo] "w"(lo), [hi] "w"(hi),
                     [cx] "r"(cx), [mx] "r"(mx), [c] "r"(c), [co] "r"(co), [nk] "r"(nk)
                   : "q0", "lr", "memory");
  /* clang-format on */
}
#else /* !MT_MVE */
static inline int8_t add_sat_s8(int32_t v)
{
#if MT_ADD_T2
  __asm__("ssat %0, #8, %0" : "+r"(v));
  return (int8_t)v;
#else /* !MT_ADD_T2 */
  return (int8_t)(v < MT_S8_MIN ? MT_S8_MIN : (v > MT_S8_MAX ? MT_S8_MAX : v));
#endif /* MT_ADD_T2 */
}

/* The fast path, one element per step, clamped to int8 only (the caller applies act_min/max);
 * reads a[i], b[i] before writing y[i]. */
static MT_NOINLINE void add_fast_scalar(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                        const int32_t *at)
{
  int32_t ka = 1 << (32 - at[MT_ADD_A_SHIFT]), kb = 1 << (32 - at[MT_ADD_B_SHIFT]);
  const int32_t ca = -at[MT_ADD_A_ZP] * ka, cb = -at[MT_ADD_B_ZP] * kb;
  const int32_t ma = at[MT_ADD_A_MULT], mb = at[MT_ADD_B_MULT], mo = at[MT_ADD_OUT_MULT];
  const int32_t k = at[MT_ADD_OUT_SHIFT] - 32;
  const int32_t co = (1 << (k - 1)) + at[MT_ADD_OUT_ZP] * (1 << k);
  __asm__("" : "+r"(ka), "+r"(kb)); /* a multiply (MLA), not a shift and an add */
  for (uint32_t i = 0; i < n; i++) {
    const int32_t sum = mt_add_mlahr(mt_add_mulhr(a[i] * ka + ca, ma), b[i] * kb + cb, mb);
    const int32_t v = mt_add_mlah(co, sum, mo) >> k;
    y[i] = add_sat_s8(v);
  }
}
/* add_fast_scalar with b's rescaled value c a constant: x is the other operand (zp, mult, shift).
 */
static MT_NOINLINE void add_const_fast_scalar(const int8_t *x, int8_t *y, uint32_t n,
                                              const int32_t *xs, int32_t c, const int32_t *at)
{
  int32_t kx = 1 << (32 - xs[2]);
  const int32_t cx = -xs[0] * kx, mx = xs[1], mo = at[MT_ADD_OUT_MULT];
  const int32_t k = at[MT_ADD_OUT_SHIFT] - 32;
  const int32_t co = (1 << (k - 1)) + at[MT_ADD_OUT_ZP] * (1 << k);
  __asm__("" : "+r"(kx)); /* a multiply (MLA), not a shift and an add */
  for (uint32_t i = 0; i < n; i++) {
    y[i] = add_sat_s8(mt_add_mlah(co, mt_add_mulhr(x[i] * kx + cx, mx) + c, mo) >> k);
  }
}
#endif /* MT_MVE */

/* y[0..n) for one run of the broadcast walk (mt_bcast_fn). The fast paths: the same-shape loop,
 * or one over x = the walking operand (qparams xs: zp, mult, shift) with the other's rescaled
 * value c a constant; the general path steps a constant operand by 0. */
static void add_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                    const int32_t *at)
{
  const uint32_t sa = mode != MT_BCAST_A_CONST;
  if (mt_add_fast_ok(at)) {
    const int32_t *xs = at + (sa ? MT_ADD_A_ZP : MT_ADD_B_ZP),
                  *cs = at + (sa ? MT_ADD_B_ZP : MT_ADD_A_ZP);
    const int32_t c =
        mode == MT_BCAST_SAME ? 0 : (int32_t)mt_rq((sa ? b[0] : a[0]) - cs[0], cs[1], cs[2]);
#if MT_MVE
    if (mode == MT_BCAST_SAME) {
      add_fast_mve(a, b, y, n, at);
    } else {
      add_const_fast_mve(sa ? a : b, y, n, xs, c, at);
    }
#else /* !MT_MVE */
    if (mode == MT_BCAST_SAME) {
      add_fast_scalar(a, b, y, n, at);
    } else {
      add_const_fast_scalar(sa ? a : b, y, n, xs, c, at);
    }
    const int32_t lo = at[MT_ADD_ACT_MIN], hi = at[MT_ADD_ACT_MAX];
    for (uint32_t i = 0; (lo > MT_S8_MIN || hi < MT_S8_MAX) && i < n; i++) {
      y[i] = (int8_t)(y[i] < lo ? lo : (y[i] > hi ? hi : y[i])); /* a fused activation */
    }
#endif /* MT_MVE */
    return;
  }
  mt_addsub_run(a, b, y, n, mode, at, 0);
}

void mt_add_same_s8(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, const int32_t *at)
{
#if MT_MVE
  if (mt_add_fast_ok(at)) { /* add_run's same-shape fast path, without its mode dispatch */
    add_fast_mve(a, b, y, n, at);
    return;
  }
#endif /* MT_MVE */
  add_run(a, b, y, n, MT_BCAST_SAME, at);
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
mt_status mt_add_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_ADD_N_INPUTS, MT_ADD_N_OUTPUTS, MT_ADD_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (args->in[MT_ADD_IN_A].rec->dtype == MT_DTYPE_INT16) {
    return mt_add_s16 != NULL ? mt_add_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_ADD_IN_A], *bt = &args->in[MT_ADD_IN_B];
  const mt_tensor *yt = &args->out[MT_ADD_OUT_Y];
  mt_bcast bc;
  if (!mt_tensor_ok(at_, MT_DTYPE_INT8, at_->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_bcast_init(&bc, at_, bt, yt) ||
      !mt_addsub_attrs_ok(args->attrs, 0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at_->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                add_run, args->attrs);
  return MT_STATUS_OK;
}
