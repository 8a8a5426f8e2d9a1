/*
 * mt_clamp_s8.c - y = min(max(x, act_min), act_max); y may be x (in place).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

// x: (...) int8  ->  y: (...) int8, same shape (y may alias x)
mt_status mt_clamp_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_CLAMP_N_INPUTS, MT_CLAMP_N_OUTPUTS, MT_CLAMP_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_CLAMP_IN_X], *yt = &args->out[MT_CLAMP_OUT_Y];
  const int32_t lo = args->attrs[MT_CLAMP_ACT_MIN], hi = args->attrs[MT_CLAMP_ACT_MAX];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_same_shape(xt, yt) ||
      !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  for (uint32_t i = 0; i < n; i++) {
    const int32_t v = x[i];
    y[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
  }
  return MT_STATUS_OK;
}
