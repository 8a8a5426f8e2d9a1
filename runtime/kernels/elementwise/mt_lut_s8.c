/*
 * mt_lut_s8.c - y = table[x + 128] with a 256-entry int8 table made at compile time (sigmoid,
 * tanh, hardswish, ...); y may be x (in place).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

// x: (...) int8; table: (256,) int8  ->  y: (...) int8, same shape (y may alias x)
mt_status mt_lut_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_LUT_N_INPUTS, MT_LUT_N_OUTPUTS, MT_LUT_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_LUT_IN_X], *tt = &args->in[MT_LUT_IN_TABLE];
  const mt_tensor *yt = &args->out[MT_LUT_OUT_Y];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rank) || !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) ||
      !mt_same_shape(xt, yt) || !mt_tensor_ok(tt, MT_DTYPE_INT8, 1) || tt->shape[0] != 256) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data, *table = (const int8_t *)tt->data + 128;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  for (uint32_t i = 0; i < n; i++) {
    y[i] = table[x[i]];
  }
  return MT_STATUS_OK;
}
