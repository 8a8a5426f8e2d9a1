/*
 * mt_rnn_relu_s8.c - `steps` nn.RNN (relu) steps of one layer and direction (docs/numerics.md,
 * rnn_tanh / rnn_relu): per step s = fc(h), then per batch row h = add(x[n, t], s[n]), whose
 * clamp is the ReLU; y[n, k] = h, through the unrolled ops' kernels (mt_recurrent.h mt_rnn_run).
 */
#include "mt_recurrent.h"

/* rnn_relu's operands and attributes are rnn_tanh's without the table (mt_rnn_run uses the
 * rnn_tanh names) */
typedef char mt_rnn_relu_layout[(MT_RNN_RELU_IN_H0 == MT_RNN_TANH_IN_H0 &&
                                 MT_RNN_RELU_X_A_ZP == MT_RNN_TANH_X_A_ZP &&
                                 MT_RNN_RELU_OUT_H == MT_RNN_TANH_OUT_H)
                                    ? 1
                                    : -1];

// x: (B, T, H); weight: (H, H) int8; h0: (B, H) -> y: (B, steps, H); h: (B, H)
mt_status mt_rnn_relu_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_RNN_RELU_N_INPUTS, MT_RNN_RELU_N_OUTPUTS, MT_RNN_RELU_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  return mt_rnn_run(args, NULL);
}
