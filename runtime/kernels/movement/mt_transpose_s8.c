/*
 * mt_transpose_s8.c - y = x4.transpose(perm) for int8 tensors of rank 1..4, addressed as 4-D
 * with unit dims prepended (perm must keep those in place). The output is written in order;
 * when the last dim stays last (perm3 == 3) each innermost run is one memcpy.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* 1 when perm is a permutation of 0..3 that fixes the `lead` prepended dims and y's shape is x's
 * permuted; fills the x strides read along each output dim. */
static int transpose_plan(const mt_op_args *a, uint32_t yd[4], size_t step[4])
{
  uint32_t xd[4];
  const mt_tensor *xt = &a->in[MT_TRANSPOSE_IN_X], *yt = &a->out[MT_TRANSPOSE_OUT_Y];
  const int32_t lead = mt_dims4(xt, xd);
  size_t stride[4];
  uint32_t seen = 0;
  if (lead < 0 || mt_dims4(yt, yd) != lead || !mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank)) {
    return 0;
  }
  stride[3] = 1;
  for (int32_t i = 2; i >= 0; i--) {
    stride[i] = stride[i + 1] * xd[i + 1];
  }
  for (int32_t i = 0; i < 4; i++) {
    const int32_t p = a->attrs[MT_TRANSPOSE_PERM0 + i];
    if (p < 0 || p > 3 || (seen & (1u << p)) || (i < lead && p != i) || yd[i] != xd[p]) {
      return 0;
    }
    seen |= 1u << p;
    step[i] = stride[p];
  }
  return 1;
}

// x: rank r <= 4, int8  ->  y: rank r, int8, y4.shape[k] = x4.shape[perm_k]
mt_status mt_transpose_s8(const mt_op_args *args)
{
  uint32_t yd[4];
  size_t step[4];
  if (!mt_args_ok(args, MT_TRANSPOSE_N_INPUTS, MT_TRANSPOSE_N_OUTPUTS, MT_TRANSPOSE_N_ATTRS) ||
      !transpose_plan(args, yd, step)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)args->in[MT_TRANSPOSE_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_TRANSPOSE_OUT_Y].data;
  for (uint32_t i0 = 0; i0 < yd[0]; i0++) {
    for (uint32_t i1 = 0; i1 < yd[1]; i1++) {
      for (uint32_t i2 = 0; i2 < yd[2]; i2++) {
        const int8_t *xr = x + i0 * step[0] + i1 * step[1] + i2 * step[2];
        if (step[3] == 1) {
          memcpy(y, xr, yd[3]);
        } else {
          for (uint32_t i3 = 0; i3 < yd[3]; i3++) {
            y[i3] = xr[i3 * step[3]];
          }
        }
        y += yd[3];
      }
    }
  }
  return MT_STATUS_OK;
}
