/*
 * mt_kernel_util.h - inline helpers shared by the portable int8 kernels.
 *
 *   requantize   mt_rq (the single-rounding multiply-shift of docs/numerics.md), mt_requantize
 *                (rq + zero point + activation clamp, the output stage of every arithmetic op)
 *   vectors      the same on int32 lanes (MVE, mt_kernel_mve.h), the DSP loads (mt_kernel_dsp.h);
 *                the dot products of the MAC ops are in mt_kernel_mac.h and mt_kernel_mac_px.h
 *   check        operand dtype/rank/shape, zero points, activation ranges, (mult, shift) pairs
 *   geometry     mt_axis: one spatial axis of a window op (conv, depthwise, pools)
 *
 * Accumulators are summed as uint32_t (wrapping, never undefined): on the reference's domain every
 * accumulator fits int32 (docs/numerics.md, "Domain"), so the wrapped sum is the exact value.
 * Outside that domain the reference raises and the kernels return some int8 value, never trap.
 *
 * ISA level: MT_MVE, MT_DSP or neither (mt_kernel_isa.h, which says how kernels keep variants).
 *
 * The pure-C path makes byte accesses to int8 data and aligned word accesses to int32 constants
 * (bias, mult, shift, tables: 4-aligned by the program format) only, so it runs on Armv6-M with
 * unaligned-access trapping on. DSP paths read int8 data with unaligned LDR (Armv7E-M and
 * Armv8-M Mainline allow it); MVE loads are byte-granular (VLDRB) or aligned words (VLDRW).
 */
#ifndef MT_KERNEL_UTIL_H
#define MT_KERNEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mt_kernel.h"

#include "mt_kernel_isa.h" /* MT_MVE, MT_DSP, MT_NOINLINE, MT_ALWAYS_INLINE */
#include "mt_kernel_mve.h" /* the output stage on vectors, mt_dot4_mve */
#include "mt_kernel_dsp.h" /* unaligned word reads, SXTB16 */

#define MT_S8_MIN    (-128)
#define MT_S8_MAX    127
#define MT_MIN_SHIFT 2
#define MT_MAX_SHIFT 62
#define MT_DIM_MAX   0x3FFFFFFF /* spatial sizes, kernels, strides, pads: below 2^30 */

/* ---- requantize ---------------------------------------------------------------------- */

/* rq(acc) = (acc * mult + 2^(shift-1)) >> shift on 64 bits; exact for |acc| <= 2^31,
 * 0 <= mult < 2^31, 2 <= shift <= 62 (|acc * mult| < 2^62). Right shifts of negative signed
 * values are arithmetic on every compiler mcutorch supports (gcc, clang, armclang). */
static inline int64_t mt_rq(int32_t acc, int32_t mult, int32_t shift)
{
  return ((int64_t)acc * mult + ((int64_t)1 << (shift - 1))) >> shift;
}

static inline int8_t mt_sat_s8(int64_t v, int32_t lo, int32_t hi)
{
  return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* y = clamp(rq(acc) + zp, lo, hi): the output stage of conv, fc, add, mul, rescale, avg pool.
 * Exact for every input. For shift > 32 (every scale below 1/2) only the product's high word is
 * shifted, in 32 bits: (p + 2^(s-1)) >> s == (hi(p) + 2^(s-33)) >> (s-32), since 2^(s-1) is a
 * multiple of 2^32 and the low word cannot carry into the result. */
static inline int8_t mt_requantize(int32_t acc, int32_t mult, int32_t shift, int32_t zp, int32_t lo,
                                   int32_t hi)
{
  const int64_t prod = (int64_t)acc * mult;
  if (shift > 32) { /* |hi(p)| < 2^30: no int32 overflow below */
    const int32_t v = (((int32_t)(prod >> 32) + (1 << (shift - 33))) >> (shift - 32)) + zp;
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
  }
  return mt_sat_s8(((prod + ((int64_t)1 << (shift - 1))) >> shift) + zp, lo, hi);
}

/* The int32 whose two's-complement bits are v (no implementation-defined conversion). */
static inline int32_t mt_wrap_s32(uint32_t v)
{
  return v <= 0x7FFFFFFFu ? (int32_t)v : (int32_t)(v - 0x80000000u) - 0x7FFFFFFF - 1;
}

/* A tensor dim as an int32 loop bound, or -1 when it is too large to be supported. */
static inline int32_t mt_dim(uint32_t v)
{
  return v <= MT_DIM_MAX ? (int32_t)v : -1;
}

/* ---- checks (each returns 1 when the argument is supported) -------------------------- */

static inline int mt_args_ok(const mt_op_args *a, uint16_t n_in, uint16_t n_out, uint16_t n_attrs)
{
  return a != NULL && a->in != NULL && a->out != NULL && a->n_in == n_in && a->n_out == n_out &&
         a->n_attrs == n_attrs && (n_attrs == 0 || a->attrs != NULL);
}

/* t has this dtype and rank, and data unless it is empty. */
static inline int mt_tensor_ok(const mt_tensor *t, uint8_t dtype, uint8_t rank)
{
  return t->rec->dtype == dtype && t->rec->rank == rank && (t->data != NULL || t->rec->size == 0);
}

/* An int32 vector of n entries (bias, mult, shift, tables). */
static inline int mt_vec_ok(const mt_tensor *t, uint32_t n)
{
  return mt_tensor_ok(t, MT_DTYPE_INT32, 1) && t->rec->shape[0] == n;
}

static inline uint32_t mt_numel(const mt_tensor *t)
{
  uint32_t n = 1;
  for (uint8_t i = 0; i < t->rec->rank; i++) {
    n *= t->rec->shape[i];
  }
  return n;
}

static inline int mt_same_shape(const mt_tensor *a, const mt_tensor *b)
{
  if (a->rec->rank != b->rec->rank) {
    return 0;
  }
  for (uint8_t i = 0; i < a->rec->rank; i++) {
    if (a->rec->shape[i] != b->rec->shape[i]) {
      return 0;
    }
  }
  return 1;
}

static inline int mt_zp_ok(int32_t zp)
{
  return zp >= MT_S8_MIN && zp <= MT_S8_MAX;
}

static inline int mt_act_ok(int32_t lo, int32_t hi)
{
  return lo >= MT_S8_MIN && lo <= hi && hi <= MT_S8_MAX;
}

static inline int mt_scale_ok(int32_t mult, int32_t shift)
{
  return mult >= 0 && shift >= MT_MIN_SHIFT && shift <= MT_MAX_SHIFT;
}

/* (mult, shift) is legal and rq of every value in [lo, hi] fits int32 (rq is monotone for
 * mult >= 0): the static domain of mul and rescale, from their attributes alone. */
static inline int mt_rq_range_ok(int32_t lo, int32_t hi, int32_t mult, int32_t shift)
{
  if (!mt_scale_ok(mult, shift)) {
    return 0;
  }
  const int64_t a = mt_rq(lo, mult, shift), b = mt_rq(hi, mult, shift);
  return a >= -0x7FFFFFFF - 1 && b <= 0x7FFFFFFF;
}

static inline int mt_scales_ok(const int32_t *mult, const int32_t *shift, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++) {
    if (!mt_scale_ok(mult[i], shift[i])) {
      return 0;
    }
  }
  return 1;
}

/* The dims of a rank-r tensor (1 <= r <= 4) seen as 4-D: 4 - r unit dims prepended (the
 * movement ops' rank convention). Returns 4 - r, or -1 when the rank is not 1..4. */
static inline int32_t mt_dims4(const mt_tensor *t, uint32_t d4[4])
{
  if (t->rec->rank < 1 || t->rec->rank > 4) {
    return -1;
  }
  const int32_t lead = 4 - t->rec->rank;
  for (int32_t i = 0; i < 4; i++) {
    d4[i] = i < lead ? 1u : t->rec->shape[i - lead];
  }
  return lead;
}

/* ---- window geometry ----------------------------------------------------------------- */

/* One spatial axis of a window op: input position of output o, tap k is
 * o * stride - pad0 + k * dilation; positions outside [0, size) are padding. */
typedef struct {
  int32_t size, kernel, stride, dilation, pad0, out;
} mt_axis;

/* Fill ax; 1 when the attributes are legal and `out` is the output length they imply:
 * (size + pad0 + pad1 - dilation * (kernel - 1) - 1) / stride + 1. */
static inline int mt_axis_init(mt_axis *ax, uint32_t size, int32_t kernel, int32_t stride,
                               int32_t dilation, int32_t pad0, int32_t pad1, uint32_t out)
{
  if (size > MT_DIM_MAX || kernel < 1 || kernel > MT_DIM_MAX || stride < 1 || stride > MT_DIM_MAX ||
      dilation < 1 || dilation > MT_DIM_MAX || pad0 < 0 || pad0 > MT_DIM_MAX || pad1 < 0 ||
      pad1 > MT_DIM_MAX) {
    return 0;
  }
  int64_t padded = (int64_t)size + pad0 + pad1;
  int64_t span = padded - (int64_t)dilation * (kernel - 1) - 1;
  if (padded > 0x7FFFFFFF || span < 0 || (uint32_t)((int32_t)span / stride + 1) != out) {
    return 0;
  }
  ax->size = (int32_t)size;
  ax->kernel = kernel;
  ax->stride = stride;
  ax->dilation = dilation;
  ax->pad0 = pad0;
  ax->out = (int32_t)out;
  return 1;
}

/* Input position of tap 0 for output o; [*k0, *k1) = the taps that land inside the input. */
static inline int32_t mt_axis_taps(const mt_axis *ax, int32_t o, int32_t *k0, int32_t *k1)
{
  int32_t start = o * ax->stride - ax->pad0; /* |start| < 2^31: checked by mt_axis_init */
  int32_t d = ax->dilation;
  int32_t lo = 0, hi = 0; /* ceil(-start / d), ceil((size - start) / d) without overflow */
  if (start < 0) {
    lo = d == 1 ? -start : (-start - 1) / d + 1;
  }
  if (start < ax->size) {
    hi = d == 1 ? ax->size - start : (ax->size - start - 1) / d + 1;
  }
  *k0 = lo < ax->kernel ? lo : ax->kernel;
  *k1 = hi < ax->kernel ? hi : ax->kernel;
  if (*k1 < *k0) {
    *k1 = *k0;
  }
  return start;
}

/* 1 when every window of the axis holds at least one input element (pools require it). */
static inline int mt_axis_windows_nonempty(const mt_axis *ax)
{
  int32_t k0, k1, k2, k3;
  if (ax->out < 1) {
    return 0;
  }
  mt_axis_taps(ax, 0, &k0, &k1);
  mt_axis_taps(ax, ax->out - 1, &k2, &k3);
  return k1 > k0 && k3 > k2;
}

/* Pool geometry from attrs (kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left,
 * pad_bottom, pad_right), the first eight attributes of both pools: x and y are int8 NHWC with
 * the same N and C, y's (Ho, Wo) follow from the attributes, and no window lies entirely in the
 * padding. */
static inline int mt_pool_axes(mt_axis *ah, mt_axis *aw, const mt_tensor *x, const mt_tensor *y,
                               const int32_t *k)
{
  return mt_tensor_ok(x, MT_DTYPE_INT8, 4) && mt_tensor_ok(y, MT_DTYPE_INT8, 4) &&
         x->rec->shape[0] == y->rec->shape[0] && x->rec->shape[3] == y->rec->shape[3] &&
         mt_dim(x->rec->shape[0]) >= 0 && mt_dim(x->rec->shape[3]) >= 0 &&
         mt_axis_init(ah, x->rec->shape[1], k[0], k[2], 1, k[4], k[6], y->rec->shape[1]) &&
         mt_axis_init(aw, x->rec->shape[2], k[1], k[3], 1, k[5], k[7], y->rec->shape[2]) &&
         mt_axis_windows_nonempty(ah) && mt_axis_windows_nonempty(aw);
}

/* TOSA reciprocal_scale of count (1 <= count <= 2^30): mult = ((2^30 + 1) << k) / count, shift
 * = 30 + k with 2^(k-1) < count <= 2^k (average pooling's divisor). Long division one bit at a
 * time in 32 bits (the remainder stays below count, the quotient below 2^31), so no 64-bit
 * division routine is linked. */
static inline void mt_reciprocal_scale(int32_t count, int32_t *mult, int32_t *shift)
{
  const uint32_t d = (uint32_t)count, top = (1u << 30) + 1u;
  uint32_t k = 0, q = 0, r = 0;
  while ((1u << k) < d) {
    k++;
  }
  for (int32_t i = 30 + (int32_t)k; i >= 0; i--) { /* bit i of top << k */
    r = (r << 1) | (i >= (int32_t)k ? (top >> (i - (int32_t)k)) & 1u : 0u);
    q <<= 1;
    if (r >= d) {
      r -= d;
      q |= 1u;
    }
  }
  *mult = (int32_t)q;
  *shift = 30 + (int32_t)k;
}

/* The int16 bodies (*_s16.c) are weak references of the int8 kernels: a firmware whose program
 * has no int16 op of a kind leaves its body out (mcutorch.device.kernels.sources_for), the
 * pointer is then NULL and the int8 kernel refuses an int16 operand (bad argument). */
#ifndef MT_WEAK16
#if defined(__GNUC__)
#define MT_WEAK16 __attribute__((weak))
#else /* !__GNUC__: always linked */
#define MT_WEAK16
#endif /* __GNUC__ */
#endif /* MT_WEAK16 */

#endif /* MT_KERNEL_UTIL_H */
