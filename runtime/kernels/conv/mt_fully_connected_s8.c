/*
 * mt_fully_connected_s8.c - y = x @ weight^T, int8 in and out, per-output requantization.
 *
 * Each output is one dot product of an input row with a weight row (both contiguous), plus the
 * bias, requantized with that output channel's (mult, shift). Outputs go four at a time, so each
 * input byte loaded feeds four MACs (mt_dot_rows_s8: MVE, DSP and C variants); the zero point
 * adds x_off * sum(w) per output, computed once per chunk of MT_MAC_CHUNK outputs for every row
 * of the batch (mt_kernel_mac.h).
 *
 * mt_fully_connected_folded_s8 is variant "folded": the compiler stores bias' = bias - in_zp *
 * sum(w) (int32) as the bias operand (and in_zp = 0), so it computes acc = bias' + sum(x * w)
 * with the same inner loop and no per-call weight sums; in_zp is checked but not used. Both live
 * in this file to share the argument checks.
 *
 * An int16 x (docs/numerics.md section 6) takes mt_fully_connected_s16 (mt_fully_connected_s16.c).
 */
#include "mt_kernel_mac.h"
#include "mt_kernels.h"
#include "mt_mac16.h"

static int fc_args_ok(const mt_op_args *a)
{
  if (!mt_args_ok(a, MT_FULLY_CONNECTED_N_INPUTS, MT_FULLY_CONNECTED_N_OUTPUTS,
                  MT_FULLY_CONNECTED_N_ATTRS)) {
    return 0;
  }
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_FULLY_CONNECTED_IN_X], *w = &a->in[MT_FULLY_CONNECTED_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_FULLY_CONNECTED_OUT_Y];
  const uint32_t n_out = w->rec->shape[0];
  return mt_tensor_ok(x, MT_DTYPE_INT8, 2) && mt_tensor_ok(w, MT_DTYPE_INT8, 2) &&
         mt_tensor_ok(y, MT_DTYPE_INT8, 2) && x->rec->shape[1] == w->rec->shape[1] &&
         y->rec->shape[0] == x->rec->shape[0] && y->rec->shape[1] == n_out &&
         mt_vec_ok(&a->in[MT_FULLY_CONNECTED_IN_BIAS], n_out) &&
         mt_vec_ok(&a->in[MT_FULLY_CONNECTED_IN_MULT], n_out) &&
         mt_vec_ok(&a->in[MT_FULLY_CONNECTED_IN_SHIFT], n_out) &&
         mt_zp_ok(at[MT_FULLY_CONNECTED_IN_ZP]) && mt_zp_ok(at[MT_FULLY_CONNECTED_OUT_ZP]) &&
         mt_act_ok(at[MT_FULLY_CONNECTED_ACT_MIN], at[MT_FULLY_CONNECTED_ACT_MAX]) &&
         mt_mac_scales_ok((const int32_t *)a->in[MT_FULLY_CONNECTED_IN_MULT].data,
                          (const int32_t *)a->in[MT_FULLY_CONNECTED_IN_SHIFT].data, n_out);
}

// x: (N, In) int8; weight: (Out, In) int8 (OI); bias, mult, shift: (Out,) int32
// -> y: (N, Out) int8. `folded`: bias already holds bias + x_off * sum(w) (variant "folded").
static MT_ALWAYS_INLINE mt_status fc_run(const mt_op_args *args, int folded)
{
  if (mt_args_ok(args, MT_FULLY_CONNECTED_N_INPUTS, MT_FULLY_CONNECTED_N_OUTPUTS,
                 MT_FULLY_CONNECTED_N_ATTRS) &&
      args->in[MT_FULLY_CONNECTED_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_fully_connected_s16 != NULL ? mt_fully_connected_s16(args, folded)
                                          : MT_STATUS_BAD_ARGUMENT;
  }
  if (!fc_args_ok(args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *at = args->attrs;
  const mt_tensor *xt = &args->in[MT_FULLY_CONNECTED_IN_X];
  const mt_tensor *wt = &args->in[MT_FULLY_CONNECTED_IN_WEIGHT];
  const int8_t *x = (const int8_t *)xt->data, *w = (const int8_t *)wt->data;
  const int32_t *bias = (const int32_t *)args->in[MT_FULLY_CONNECTED_IN_BIAS].data;
  const int32_t *mult = (const int32_t *)args->in[MT_FULLY_CONNECTED_IN_MULT].data;
  const int32_t *shift = (const int32_t *)args->in[MT_FULLY_CONNECTED_IN_SHIFT].data;
  int8_t *y = (int8_t *)args->out[MT_FULLY_CONNECTED_OUT_Y].data;
  const uint32_t batch = xt->rec->shape[0], n_in = xt->rec->shape[1], n_out = wt->rec->shape[0];
  const int32_t x_off = -at[MT_FULLY_CONNECTED_IN_ZP], out_zp = at[MT_FULLY_CONNECTED_OUT_ZP];
  const int32_t lo = at[MT_FULLY_CONNECTED_ACT_MIN], hi = at[MT_FULLY_CONNECTED_ACT_MAX];
  uint32_t sums[MT_MAC_CHUNK], acc[MT_MAC_CHUNK];
  for (uint32_t o = 0; o < n_out; o += MT_MAC_CHUNK) {
    const int32_t nc = n_out - o < MT_MAC_CHUNK ? (int32_t)(n_out - o) : MT_MAC_CHUNK;
    const int8_t *w_c = w + (size_t)o * n_in;
    const uint32_t *base = (const uint32_t *)(bias + o);
    if (!folded) { /* bias + x_off * sum(w), once per chunk of output channels */
      for (int32_t j = 0; j < nc; j++) {
        sums[j] = 0;
      }
      mt_wsum_rows_s8(w_c, n_in, n_in, nc, sums);
      for (int32_t j = 0; j < nc; j++) {
        sums[j] = (uint32_t)bias[o + (uint32_t)j] + (uint32_t)x_off * sums[j];
      }
      base = sums;
    }
    for (uint32_t n = 0; n < batch; n++) {
      const mt_out_stage out = {mult + o, shift + o, out_zp, lo, hi, y + (size_t)n * n_out + o,
                                NULL};
      mt_dot_rows_s8(x + (size_t)n * n_in, w_c, n_in, n_in, nc, base, acc, &out);
    }
  }
  return MT_STATUS_OK;
}

mt_status mt_fully_connected_s8(const mt_op_args *args)
{
  return fc_run(args, 0);
}

// Variant "folded": the compiler stored bias' = bias - in_zp * sum(w) (no per-call sums).
mt_status mt_fully_connected_folded_s8(const mt_op_args *args)
{
  return fc_run(args, 1);
}
