/*
 * mt_pad_s8.c - constant padding of an int8 or int16 tensor of rank 1..4 (unit dims prepended;
 * those take no padding): y is filled with `value` (int8, or int16 in [-32767, 32767]), then each
 * innermost row of x is copied to its place.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* 1 when the attributes are legal and y's dims are x's grown by before + after. */
static int pad_plan(const mt_op_args *a, uint32_t xd[4], uint32_t yd[4])
{
  const mt_tensor *xt = &a->in[MT_PAD_IN_X], *yt = &a->out[MT_PAD_OUT_Y];
  const int32_t *at = a->attrs;
  const int32_t lead = mt_dims4(xt, xd), wide = xt->rec->dtype == MT_DTYPE_INT16;
  const int32_t lo = wide ? -32767 : MT_S8_MIN, hi = wide ? 32767 : MT_S8_MAX;
  if (lead < 0 || mt_dims4(yt, yd) != lead || (xt->rec->dtype != MT_DTYPE_INT8 && !wide) ||
      !mt_tensor_ok(xt, xt->rec->dtype, xt->rec->rank) ||
      !mt_tensor_ok(yt, xt->rec->dtype, yt->rec->rank) || at[MT_PAD_VALUE] < lo ||
      at[MT_PAD_VALUE] > hi) {
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

// x: rank r <= 4, int8 or int16  ->  y: rank r, x's dtype, dim k grows by before_k + after_k
mt_status mt_pad_s8(const mt_op_args *args)
{
  uint32_t xd[4], yd[4];
  if (!mt_args_ok(args, MT_PAD_N_INPUTS, MT_PAD_N_OUTPUTS, MT_PAD_N_ATTRS) ||
      !pad_plan(args, xd, yd)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *b = &args->attrs[MT_PAD_BEFORE0];
  const size_t es = args->in[MT_PAD_IN_X].rec->dtype == MT_DTYPE_INT16 ? 2 : 1,
               n = mt_numel(args->out);
  const int8_t *x = (const int8_t *)args->in[MT_PAD_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_PAD_OUT_Y].data;
  if (es == 1) {
    memset(y, args->attrs[MT_PAD_VALUE], n);
  }
  for (size_t k = 0; es == 2 && k < n; k++) {
    ((int16_t *)(void *)y)[k] = (int16_t)args->attrs[MT_PAD_VALUE];
  }
  for (uint32_t i0 = 0; i0 < xd[0]; i0++) {
    for (uint32_t i1 = 0; i1 < xd[1]; i1++) {
      for (uint32_t i2 = 0; i2 < xd[2]; i2++) {
        const size_t r = ((size_t)(i0 + (uint32_t)b[0]) * yd[1] + i1 + (uint32_t)b[1]) * yd[2] +
                         i2 + (uint32_t)b[2]; /* the output row */
        const size_t row = r * yd[3] + (uint32_t)b[3];
        memcpy(y + row * es, x, xd[3] * es);
        x += xd[3] * es;
      }
    }
  }
  return MT_STATUS_OK;
}
