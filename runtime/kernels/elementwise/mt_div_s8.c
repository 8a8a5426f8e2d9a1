/*
 * mt_div_s8.c - element-wise a / b of two int8 tensors, numpy broadcasting (mt_bcast.h); y may
 * be a or b (in place):
 *   n = (a - a_zp) * mult (int64, |n| < 2^39), d = b - b_zp (|d| <= 255)
 *   q = round_half_away(n / d) = sign * ((2|n| + |d|) / (2|d|))
 *   y = clamp(((q + 2^(shift-1)) >> shift) + out_zp, -128, 127), then act_min..act_max
 *   d = 0: y = 127, -128 or out_zp by the sign of a - a_zp (+inf, -inf, NaN -> 0), then clamped
 * Every input is in the domain: nothing can leave int64. One portable path: a 64-by-32-bit
 * unsigned division per element (a library call on every Cortex-M; Armv6-M has no divide
 * instruction at all).
 */
#include "mt_bcast.h"
#include "mt_kernels.h"

static int8_t div_one(int32_t na, int32_t nb, const int32_t *at)
{
  const int32_t lo = at[MT_DIV_ACT_MIN], hi = at[MT_DIV_ACT_MAX];
  int64_t v;
  if (nb == 0) {
    v = na > 0 ? MT_S8_MAX : (na < 0 ? MT_S8_MIN : at[MT_DIV_OUT_ZP]);
  } else {
    const uint64_t n = (uint64_t)(uint32_t)(na < 0 ? -na : na) * (uint32_t)at[MT_DIV_MULT];
    const uint32_t d = (uint32_t)(nb < 0 ? -nb : nb);
    const int64_t m = (int64_t)((2 * n + d) / (2 * (uint64_t)d));
    const int64_t q = (na < 0) != (nb < 0) && n != 0 ? -m : m;
    v = ((q + ((int64_t)1 << (at[MT_DIV_SHIFT] - 1))) >> at[MT_DIV_SHIFT]) + at[MT_DIV_OUT_ZP];
  }
  return mt_sat_s8(v, lo, hi);
}

/* y[0..n) for one run of the broadcast walk (mt_bcast_fn): a constant operand steps by 0. */
static void div_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                    const int32_t *at)
{
  const uint32_t sa = mode != MT_BCAST_A_CONST, sb = mode != MT_BCAST_B_CONST;
  for (uint32_t i = 0; i < n; i++) { /* reads a[i], b[i] before writing y[i]: in place is fine */
    y[i] = div_one(a[i * sa] - at[MT_DIV_A_ZP], b[i * sb] - at[MT_DIV_B_ZP], at);
  }
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
mt_status mt_div_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_DIV_N_INPUTS, MT_DIV_N_OUTPUTS, MT_DIV_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[MT_DIV_IN_A], *bt = &args->in[MT_DIV_IN_B];
  const mt_tensor *yt = &args->out[MT_DIV_OUT_Y];
  const int32_t *k = args->attrs;
  mt_bcast bc;
  if (!mt_tensor_ok(at, MT_DTYPE_INT8, at->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      !mt_zp_ok(k[MT_DIV_A_ZP]) || !mt_zp_ok(k[MT_DIV_B_ZP]) || !mt_zp_ok(k[MT_DIV_OUT_ZP]) ||
      !mt_scale_ok(k[MT_DIV_MULT], k[MT_DIV_SHIFT]) ||
      !mt_act_ok(k[MT_DIV_ACT_MIN], k[MT_DIV_ACT_MAX])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                div_run, k);
  return MT_STATUS_OK;
}
