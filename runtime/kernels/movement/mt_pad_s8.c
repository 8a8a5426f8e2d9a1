/*
 * mt_pad_s8.c - constant padding of an int8 tensor of rank 1..4 (unit dims prepended; those take
 * no padding): y is filled with `value`, then each innermost row of x is copied to its place.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* 1 when the attributes are legal and y's dims are x's grown by before + after. */
static int pad_plan(const mt_op_args *a, uint32_t xd[4], uint32_t yd[4])
{
  const mt_tensor *xt = &a->in[MT_PAD_IN_X], *yt = &a->out[MT_PAD_OUT_Y];
  const int32_t *at = a->attrs;
  const int32_t lead = mt_dims4(xt, xd);
  if (lead < 0 || mt_dims4(yt, yd) != lead || !mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) || at[MT_PAD_VALUE] < MT_S8_MIN ||
      at[MT_PAD_VALUE] > MT_S8_MAX) {
    return 0;
  }
  for (int32_t i = 0; i < 4; i++) {
    const int32_t before = at[MT_PAD_BEFORE0 + i], after = at[MT_PAD_AFTER0 + i];
    if (before < 0 || after < 0 || (i < lead && (before | after) != 0) ||
        (uint64_t)xd[i] + (uint32_t)before + (uint32_t)after != yd[i]) {
      return 0;
    }
  }
  return 1;
}

// x: rank r <= 4, int8  ->  y: rank r, int8, dim k grows by before_k + after_k
mt_status mt_pad_s8(const mt_op_args *args)
{
  uint32_t xd[4], yd[4];
  if (!mt_args_ok(args, MT_PAD_N_INPUTS, MT_PAD_N_OUTPUTS, MT_PAD_N_ATTRS) ||
      !pad_plan(args, xd, yd)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *b = &args->attrs[MT_PAD_BEFORE0];
  const int8_t *x = (const int8_t *)args->in[MT_PAD_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_PAD_OUT_Y].data;
  memset(y, args->attrs[MT_PAD_VALUE], (size_t)yd[0] * yd[1] * yd[2] * yd[3]);
  for (uint32_t i0 = 0; i0 < xd[0]; i0++) {
    for (uint32_t i1 = 0; i1 < xd[1]; i1++) {
      for (uint32_t i2 = 0; i2 < xd[2]; i2++) {
        const size_t r = ((size_t)(i0 + (uint32_t)b[0]) * yd[1] + i1 + (uint32_t)b[1]) * yd[2] +
                         i2 + (uint32_t)b[2]; /* the output row */
        const size_t row = r * yd[3] + (uint32_t)b[3];
        memcpy(y + row, x, xd[3]);
        x += xd[3];
      }
    }
  }
  return MT_STATUS_OK;
}
