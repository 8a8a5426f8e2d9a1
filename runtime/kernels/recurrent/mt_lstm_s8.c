/*
 * mt_lstm_s8.c - `steps` LSTM steps of one layer and direction (docs/numerics.md, lstm): per
 * step s = fc(h), then per batch row, in place in the row's gates (mt_recurrent.h):
 *   a = add(x[n, t], s[n]);  i, f, g, o = lut(a's quarters);  c = add(mul(f, c), mul(i, g));
 *   h = mul(o, lut(c));  y[n, k] = h
 * each through the kernel of the unrolled op, so the integers are the unrolled program's.
 */
#include "mt_recurrent.h"

/* One batch row of one step: gates in q (4H), state h, c (H), the x row xr (4H). */
static mt_status lstm_row(const mt_rnn *r, const mt_op_args *a, const uint8_t *xr, uint8_t *q,
                          uint8_t *h, uint8_t *c)
{
  const int32_t *at = a->attrs;
  const size_t hb = (size_t)r->hidden * r->e;
  uint8_t *i = q, *f = q + hb, *g = q + 2 * hb, *o = q + 3 * hb;
  MT_RNN_TRY(mt_rnn_add(r, r->g, xr, q, q, at + MT_LSTM_X_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_lut(r, i, &a->in[MT_LSTM_IN_TABLE_I], i));
  MT_RNN_TRY(mt_rnn_lut(r, f, &a->in[MT_LSTM_IN_TABLE_F], f));
  MT_RNN_TRY(mt_rnn_lut(r, g, &a->in[MT_LSTM_IN_TABLE_G], g));
  MT_RNN_TRY(mt_rnn_lut(r, o, &a->in[MT_LSTM_IN_TABLE_O], o));
  MT_RNN_TRY(mt_rnn_mul(r, r->hidden, f, c, f, at + MT_LSTM_FM_A_ZP, MT_MUL_N_ATTRS));
  MT_RNN_TRY(mt_rnn_mul(r, r->hidden, i, g, i, at + MT_LSTM_IM_A_ZP, MT_MUL_N_ATTRS));
  MT_RNN_TRY(mt_rnn_add(r, r->hidden, f, i, c, at + MT_LSTM_C_A_ZP, MT_ADD_N_ATTRS));
  MT_RNN_TRY(mt_rnn_lut(r, c, &a->in[MT_LSTM_IN_TABLE_C], g));
  return mt_rnn_mul(r, r->hidden, o, g, h, at + MT_LSTM_HM_A_ZP, MT_MUL_N_ATTRS);
}

// x: (B, T, 4H); weight: (4H, H) int8; h0, c0: (B, H) -> y: (B, steps, H); h, c: (B, H)
mt_status mt_lstm_s8(const mt_op_args *args)
{
  mt_rnn r;
  if (!mt_args_ok(args, MT_LSTM_N_INPUTS, MT_LSTM_N_OUTPUTS, MT_LSTM_N_ATTRS) ||
      !mt_rnn_init(&r, args, 4, MT_LSTM_IN_H0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *c0 = &args->in[MT_LSTM_IN_C0], *ct = &args->out[MT_LSTM_OUT_C];
  if (!mt_tensor_ok(c0, r.dtype, 2) || !mt_tensor_ok(ct, r.dtype, 2) || c0->rec->shape[0] != r.b ||
      c0->rec->shape[1] != r.hidden || ct->rec->shape[0] != r.b || ct->rec->shape[1] != r.hidden) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  uint8_t *h = (uint8_t *)args->out[MT_LSTM_OUT_H].data, *c = (uint8_t *)ct->data;
  uint8_t *y = (uint8_t *)args->out[MT_LSTM_OUT_Y].data, *q = (uint8_t *)args->scratch;
  const uint8_t *x = (const uint8_t *)args->in[MT_LSTM_IN_X].data;
  const size_t hb = (size_t)r.hidden * r.e, gb = (size_t)r.g * r.e;
  memcpy(h, args->in[MT_LSTM_IN_H0].data, r.b * hb);
  memcpy(c, c0->data, r.b * hb);
  for (int32_t j = 0; j < r.steps; j++) {
    const uint32_t t = mt_rnn_time(&r, j), k = mt_rnn_column(&r, j);
    MT_RNN_TRY(mt_rnn_product(&r, args, h, args->attrs + MT_LSTM_IN_ZP));
    for (uint32_t n = 0; n < r.b; n++) {
      MT_RNN_TRY(
          lstm_row(&r, args, x + ((size_t)n * r.t + t) * gb, q + n * gb, h + n * hb, c + n * hb));
      memcpy(y + ((size_t)n * r.steps + k) * hb, h + n * hb, hb);
    }
  }
  return MT_STATUS_OK;
}
