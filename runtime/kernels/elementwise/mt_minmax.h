/*
 * mt_minmax.h - the loop shared by mt_maximum_s8 and mt_minimum_s8:
 *   y = clamp(max(a, b)) or clamp(min(a, b)); a, b and y share qparams, so no arithmetic.
 * Numpy broadcasting (mt_bcast.h): a run's constant operand is one value repeated in every lane.
 * y may alias a or b (in place): every path reads a lane before it writes it, walking forward.
 * MVE: 16 lanes per step under tail predication; DSP: 4 lanes per word (SSUB8 sets GE, SEL
 * picks); pure C: one element per step, and the tail of the DSP path.
 */
#ifndef MT_MINMAX_H
#define MT_MINMAX_H

#include "mt_bcast.h"
#include "mt_kernels.h"

/* maximum and minimum have the same operands and attributes (mcutorch.ops.elementwise) */
#define MT_MINMAX_SAME_LAYOUT                                                                      \
  (MT_MAXIMUM_IN_B == MT_MINIMUM_IN_B && MT_MAXIMUM_ACT_MIN == MT_MINIMUM_ACT_MIN &&               \
   MT_MAXIMUM_ACT_MAX == MT_MINIMUM_ACT_MAX)
typedef char mt_minmax_same_layout[MT_MINMAX_SAME_LAYOUT ? 1 : -1];

#if MT_DSP
/* max or min of four int8 lanes, then clamp to [lo4, hi4] (each lane of lo4/hi4 the bound) */
static inline __attribute__((always_inline)) uint32_t
mt_minmax4(uint32_t a, uint32_t b, int take_max, uint32_t lo4, uint32_t hi4)
{
  (void)__ssub8((int32_t)a, (int32_t)b); /* GE where a >= b */
  uint32_t v =
      take_max ? (uint32_t)__sel((int32_t)a, (int32_t)b) : (uint32_t)__sel((int32_t)b, (int32_t)a);
  (void)__ssub8((int32_t)v, (int32_t)lo4); /* GE where v >= lo */
  v = (uint32_t)__sel((int32_t)v, (int32_t)lo4);
  (void)__ssub8((int32_t)hi4, (int32_t)v); /* GE where v <= hi */
  return (uint32_t)__sel((int32_t)v, (int32_t)hi4);
}
#endif /* MT_DSP */

/* y[0..n) for one run of the broadcast walk; take_max: max, else min. */
static MT_ALWAYS_INLINE void mt_minmax_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                           int mode, const int32_t *attrs, int take_max)
{
  const int32_t lo = attrs[MT_MAXIMUM_ACT_MIN], hi = attrs[MT_MAXIMUM_ACT_MAX];
  const uint32_t sa = mode != MT_BCAST_A_CONST, sb = mode != MT_BCAST_B_CONST;
  uint32_t i = 0;
#if MT_MVE
  const int8x16_t vlo = vdupq_n_s8((int8_t)lo), vhi = vdupq_n_s8((int8_t)hi);
  const int8x16_t ca = vdupq_n_s8(a[0]), cb = vdupq_n_s8(b[0]);
  for (; i < n; i += 16) {
    const mve_pred16_t p = vctp8q(n - i);
    const int8x16_t va = sa ? vldrbq_z_s8(a + i, p) : ca, vb = sb ? vldrbq_z_s8(b + i, p) : cb;
    const int8x16_t v = take_max ? vmaxq_s8(va, vb) : vminq_s8(va, vb);
    vstrbq_p_s8(y + i, vminq_s8(vmaxq_s8(v, vlo), vhi), p);
  }
#elif MT_DSP
  const uint32_t lo4 = 0x01010101u * (uint8_t)lo, hi4 = 0x01010101u * (uint8_t)hi;
  const uint32_t ca = 0x01010101u * (uint8_t)a[0], cb = 0x01010101u * (uint8_t)b[0];
  for (; i + 4 <= n; i += 4) {
    const uint32_t va = sa ? mt_read_s8x4(a + i) : ca, vb = sb ? mt_read_s8x4(b + i) : cb;
    const uint32_t v = mt_minmax4(va, vb, take_max, lo4, hi4);
    __builtin_memcpy(y + i, &v, 4);
  }
#endif /* MT_MVE, MT_DSP */
  for (; i < n; i++) {
    const int32_t va = a[i * sa], vb = b[i * sb];
    const int32_t v = take_max ? (va > vb ? va : vb) : (va < vb ? va : vb);
    y[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
  }
}

static inline void mt_maximum_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                                  const int32_t *attrs)
{
  mt_minmax_run(a, b, y, n, mode, attrs, 1);
}

static inline void mt_minimum_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                                  const int32_t *attrs)
{
  mt_minmax_run(a, b, y, n, mode, attrs, 0);
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
static MT_ALWAYS_INLINE mt_status mt_minmax_s8(const mt_op_args *args, int take_max)
{
  if (!mt_args_ok(args, MT_MAXIMUM_N_INPUTS, MT_MAXIMUM_N_OUTPUTS, MT_MAXIMUM_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[MT_MAXIMUM_IN_A], *bt = &args->in[MT_MAXIMUM_IN_B];
  const mt_tensor *yt = &args->out[MT_MAXIMUM_OUT_Y];
  mt_bcast bc;
  if (!mt_tensor_ok(at, MT_DTYPE_INT8, at->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      !mt_act_ok(args->attrs[MT_MAXIMUM_ACT_MIN], args->attrs[MT_MAXIMUM_ACT_MAX])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                take_max ? mt_maximum_run : mt_minimum_run, args->attrs);
  return MT_STATUS_OK;
}

#endif /* MT_MINMAX_H */
