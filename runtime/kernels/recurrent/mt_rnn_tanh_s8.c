/*
 * mt_rnn_tanh_s8.c - `steps` nn.RNN (tanh) steps of one layer and direction (docs/numerics.md,
 * rnn_tanh / rnn_relu): per step s = fc(h), then per batch row h = lut(add(x[n, t], s[n]),
 * table); y[n, k] = h, each through the kernel of the unrolled op (mt_recurrent.h mt_rnn_run).
 */
#include "mt_recurrent.h"

// x: (B, T, H); weight: (H, H) int8; h0: (B, H); table: 256 int8 / 513 int16 -> y: (B, steps, H)
mt_status mt_rnn_tanh_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_RNN_TANH_N_INPUTS, MT_RNN_TANH_N_OUTPUTS, MT_RNN_TANH_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  return mt_rnn_run(args, &args->in[MT_RNN_TANH_IN_TABLE]);
}
