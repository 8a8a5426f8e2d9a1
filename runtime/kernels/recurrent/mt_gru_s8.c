/*
 * mt_gru_s8.c - `steps` GRU steps of one layer and direction (docs/numerics.md, gru): per step
 * s = fc(h), then per batch row, in place in the row's gates (mt_recurrent.h):
 *   r = lut(add(x_r, s_r));  z = lut(add(x_z, s_z));  n = lut(add(x_n, mul(r, add(s_n, b_n))));
 *   h = add(n, mul(z, sub(h, n)));  y[n, k] = h
 * each through the kernel of the unrolled op, so the integers are the unrolled program's.
 */
#include "mt_recurrent.h"

/* One batch row of one step: s = q (3H) becomes r | z | n, then h - n, z * (h - n) over r. */
static mt_status gru_row(const mt_rnn *r, const mt_op_args *a, const uint8_t *xr, uint8_t *q,
                         uint8_t *h)
{
  const int32_t *at = a->attrs;
  const size_t hb = (size_t)r->hidden * r->e;
  uint8_t *rg = q, *zg = q + hb, *ng = q + 2 * hb;
  const uint32_t n = r->hidden;
  MT_RNN_TRY(mt_rnn_add(r, n, xr, rg, rg, at + MT_GRU_R_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_lut(r, rg, &a->in[MT_GRU_IN_TABLE_R], rg));
  MT_RNN_TRY(mt_rnn_add(r, n, xr + hb, zg, zg, at + MT_GRU_Z_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_lut(r, zg, &a->in[MT_GRU_IN_TABLE_Z], zg));
  MT_RNN_TRY(
      mt_rnn_add(r, n, ng, a->in[MT_GRU_IN_BIAS_N].data, ng, at + MT_GRU_B_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_mul(r, n, rg, ng, ng, at + MT_GRU_RN_A_ZP, MT_MUL_N_ATTRS));
  MT_RNN_TRY(mt_rnn_add(r, n, xr + 2 * hb, ng, ng, at + MT_GRU_N_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_lut(r, ng, &a->in[MT_GRU_IN_TABLE_N], ng));
  MT_RNN_TRY(mt_rnn_sub(r, n, h, ng, rg, at + MT_GRU_D_A_ZP, MT_SUB_N_ATTRS));
  MT_RNN_TRY(mt_rnn_mul(r, n, zg, rg, rg, at + MT_GRU_ZD_A_ZP, MT_MUL_N_ATTRS));
  return mt_rnn_add(r, n, ng, rg, h, at + MT_GRU_H_A_ZP, MT_ADD_N_ATTRS);
}

// x: (B, T, 3H); weight: (3H, H) int8; h0: (B, H); bias_n: (H,) -> y: (B, steps, H); h: (B, H)
mt_status mt_gru_s8(const mt_op_args *args)
{
  mt_rnn r;
  if (!mt_args_ok(args, MT_GRU_N_INPUTS, MT_GRU_N_OUTPUTS, MT_GRU_N_ATTRS) ||
      !mt_rnn_init(&r, args, 3, MT_GRU_IN_H0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *bn = &args->in[MT_GRU_IN_BIAS_N];
  if (!mt_tensor_ok(bn, r.dtype, 1) || bn->rec->shape[0] != r.hidden) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  uint8_t *h = (uint8_t *)args->out[MT_GRU_OUT_H].data, *q = (uint8_t *)args->scratch;
  uint8_t *y = (uint8_t *)args->out[MT_GRU_OUT_Y].data;
  const uint8_t *x = (const uint8_t *)args->in[MT_GRU_IN_X].data;
  const size_t hb = (size_t)r.hidden * r.e, gb = (size_t)r.g * r.e;
  memcpy(h, args->in[MT_GRU_IN_H0].data, r.b * hb);
  for (int32_t j = 0; j < r.steps; j++) {
    const uint32_t t = mt_rnn_time(&r, j), k = mt_rnn_column(&r, j);
    MT_RNN_TRY(mt_rnn_product(&r, args, h, args->attrs + MT_GRU_IN_ZP));
    for (uint32_t n = 0; n < r.b; n++) {
      MT_RNN_TRY(gru_row(&r, args, x + ((size_t)n * r.t + t) * gb, q + n * gb, h + n * hb));
      memcpy(y + ((size_t)n * r.steps + k) * hb, h + n * hb, hb);
    }
  }
  return MT_STATUS_OK;
}
