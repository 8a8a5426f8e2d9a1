/*
 * mt_compare_s8.c - y = (sa (a - a_zp) KIND sb (b - b_zp)) as a uint8 0/1 mask, decided exactly:
 *   (a - a_zp) * a_mult * 2^a_shift  KIND  (b - b_zp) * b_mult * 2^b_shift   in int64
 * (docs/numerics.md, compare; |each side| < 2^63 on the domain a_mult <= 2^24, a_shift <= 31).
 * KIND (attribute kind): 0 eq, 1 ne, 2 gt, 3 ge, 4 lt, 5 le. Numpy broadcasting (mt_bcast.h).
 * Equal scales (the threshold form q KIND T of a comparison with a number, and two tensors
 * sharing qparams) compare the int8 codes themselves: MVE 16 lanes per VCMP, VPSEL of 1/0.
 * y may alias a or b (in place): every path reads a lane before it writes it.
 */
#include "mt_bcast.h"
#include "mt_kernels.h"

/* bit (sign(va - vb) + 1) of the kind's truth table: bit 0 less, bit 1 equal, bit 2 greater */
static const uint8_t mt_compare_table[6] = {2u, 5u, 4u, 6u, 1u, 3u};

static inline int64_t mt_compare_side(int32_t v, int32_t zp, int32_t mult, int32_t shift)
{
  return (int64_t)(v - zp) * mult * ((int64_t)1 << shift); /* no shift of a negative value */
}

#if MT_MVE
static inline mve_pred16_t mt_compare_vec(int8x16_t a, int8x16_t b, int32_t kind)
{
  switch (kind) {
  case 0:
    return vcmpeqq_s8(a, b);
  case 1:
    return vcmpneq_s8(a, b);
  case 2:
    return vcmpgtq_s8(a, b);
  case 3:
    return vcmpgeq_s8(a, b);
  case 4:
    return vcmpltq_s8(a, b);
  default:
    return vcmpleq_s8(a, b);
  }
}
#endif /* MT_MVE */

/* y[0..n) for one run of the broadcast walk (y is the uint8 mask, written through int8_t). */
static void mt_compare_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                           const int32_t *attrs)
{
  const int32_t kind = attrs[MT_COMPARE_KIND], za = attrs[MT_COMPARE_A_ZP];
  const int32_t ma = attrs[MT_COMPARE_A_MULT], sa = attrs[MT_COMPARE_A_SHIFT];
  const int32_t zb = attrs[MT_COMPARE_B_ZP], mb = attrs[MT_COMPARE_B_MULT];
  const int32_t sb = attrs[MT_COMPARE_B_SHIFT];
  const uint32_t step_a = mode != MT_BCAST_A_CONST, step_b = mode != MT_BCAST_B_CONST;
  const uint32_t table = mt_compare_table[kind];
  uint32_t i = 0;
  if (ma == mb && sa == sb && za == zb) { /* same qparams: compare the codes */
#if MT_MVE
    const int8x16_t ca = vdupq_n_s8(a[0]), cb = vdupq_n_s8(b[0]);
    const int8x16_t one = vdupq_n_s8(1), zero = vdupq_n_s8(0);
    for (; i < n; i += 16) {
      const mve_pred16_t p = vctp8q(n - i);
      const int8x16_t va = step_a ? vldrbq_z_s8(a + i, p) : ca;
      const int8x16_t vb = step_b ? vldrbq_z_s8(b + i, p) : cb;
      vstrbq_p_s8(y + i, vpselq_s8(one, zero, mt_compare_vec(va, vb, kind)), p);
    }
#endif /* MT_MVE */
    for (; i < n; i++) {
      const int32_t va = a[i * step_a], vb = b[i * step_b];
      y[i] = (int8_t)((table >> ((va > vb) - (va < vb) + 1)) & 1u);
    }
    return;
  }
  for (; i < n; i++) {
    const int64_t va = mt_compare_side(a[i * step_a], za, ma, sa);
    const int64_t vb = mt_compare_side(b[i * step_b], zb, mb, sb);
    y[i] = (int8_t)((table >> ((va > vb) - (va < vb) + 1)) & 1u);
  }
}

static int mt_compare_side_ok(int32_t zp, int32_t mult, int32_t shift)
{
  return mt_zp_ok(zp) && mult >= 1 && mult <= (1 << 24) && shift >= 0 && shift <= 31;
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: uint8 0/1 (y may alias a or b)
mt_status mt_compare_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_COMPARE_N_INPUTS, MT_COMPARE_N_OUTPUTS, MT_COMPARE_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[MT_COMPARE_IN_A], *bt = &args->in[MT_COMPARE_IN_B];
  const mt_tensor *yt = &args->out[MT_COMPARE_OUT_Y];
  const int32_t *attrs = args->attrs;
  mt_bcast bc;
  if (!mt_tensor_ok(at, MT_DTYPE_INT8, at->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_UINT8, yt->rec->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      attrs[MT_COMPARE_KIND] < 0 || attrs[MT_COMPARE_KIND] > 5 ||
      !mt_compare_side_ok(attrs[MT_COMPARE_A_ZP], attrs[MT_COMPARE_A_MULT],
                          attrs[MT_COMPARE_A_SHIFT]) ||
      !mt_compare_side_ok(attrs[MT_COMPARE_B_ZP], attrs[MT_COMPARE_B_MULT],
                          attrs[MT_COMPARE_B_SHIFT])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                mt_compare_run, attrs);
  return MT_STATUS_OK;
}
