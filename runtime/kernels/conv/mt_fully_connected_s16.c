/*
 * mt_fully_connected_s16.c - fully_connected on an int16 x (a16w8, docs/numerics.md section 6):
 * an int64 bias within int48, zero points 0, acc = bias + sum(x * w) in int64, y = clamp(rq(acc,
 * mult, shift)) with a 16-bit multiplier (0 <= mult < 2^15), int16 y. mt_fully_connected_s8 and
 * its variant "folded" (whose in_zp is checked as int8 but unused) call it for an int16 x.
 *
 * Rows go in pairs (mt_mac16_channels2: on MVE each weight load feeds both rows, three outputs
 * per pass; DSP and C four outputs per x load), in the 32-bit form when the call's bound allows
 * it (mt_stage16; sum |w| read only for a batch of at least 8 rows).
 */
#include "mt_mac16.h"

// x: (N, In) int16; weight: (Out, In) int8; bias: (Out,) int64; mult, shift: (Out,) int32
// -> y: (N, Out) int16. in_zp must be 0 but in variant "folded" (checked as int8, unused).
mt_status mt_fully_connected_s16(const mt_op_args *a, int folded)
{
  const int32_t *at = a->attrs;
  const mt_tensor *xt = &a->in[MT_FULLY_CONNECTED_IN_X], *wt = &a->in[MT_FULLY_CONNECTED_IN_WEIGHT];
  const mt_tensor *yt = &a->out[MT_FULLY_CONNECTED_OUT_Y];
  const int32_t lo = at[MT_FULLY_CONNECTED_ACT_MIN], hi = at[MT_FULLY_CONNECTED_ACT_MAX];
  const uint32_t n_out = wt->rec->shape[0], n_in = xt->rec->shape[1];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT16, 2) || !mt_tensor_ok(wt, MT_DTYPE_INT8, 2) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT16, 2) || n_in != wt->rec->shape[1] ||
      yt->rec->shape[0] != xt->rec->shape[0] || yt->rec->shape[1] != n_out ||
      !mt_mac16_ok(&a->in[MT_FULLY_CONNECTED_IN_BIAS], &a->in[MT_FULLY_CONNECTED_IN_MULT],
                   &a->in[MT_FULLY_CONNECTED_IN_SHIFT], n_out, at[MT_FULLY_CONNECTED_OUT_ZP], lo,
                   hi) ||
      (folded ? !mt_zp_ok(at[MT_FULLY_CONNECTED_IN_ZP]) : at[MT_FULLY_CONNECTED_IN_ZP] != 0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *x = (const int16_t *)xt->data;
  const int8_t *w = (const int8_t *)wt->data;
  int16_t *y = (int16_t *)yt->data;
  mt_stage16 st;
  mt_stage16_init(&st, (const int64_t *)a->in[MT_FULLY_CONNECTED_IN_BIAS].data,
                  (const int32_t *)a->in[MT_FULLY_CONNECTED_IN_MULT].data,
                  (const int32_t *)a->in[MT_FULLY_CONNECTED_IN_SHIFT].data, lo, hi, w, n_in, n_out,
                  n_in, xt->rec->shape[0] >= 8);
  for (uint32_t n = 0; n < xt->rec->shape[0];
       n += 2) { /* rows in pairs: each weight load feeds two */
    const int16_t *xa = x + (size_t)n * n_in;
    int16_t *ya = y + (size_t)n * n_out;
    if (!(n + 1 < xt->rec->shape[0]
              ? mt_mac16_channels2(&st, xa, xa + n_in, w, n_in, n_in, (int32_t)n_out, ya,
                                   ya + n_out)
              : mt_mac16_channels(&st, xa, w, n_in, n_in, (int32_t)n_out, ya))) {
      return MT_STATUS_BAD_ARGUMENT; /* the loader bounds both: only direct kernel calls */
    }
  }
  return MT_STATUS_OK;
}
