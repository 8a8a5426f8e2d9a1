/*
 * mt_concat_s8.c - join int8 or int16 tensors (one dtype) of equal rank (1..4) along 4-D dim `axis`
 * (unit dims prepended, axis in [4 - rank, 3]). For each index of the dims before the axis, every
 * input contributes one contiguous block: a memcpy per (outer index, input).
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* 1 when every input matches y except along axis and the axis lengths add up to y's. */
static int concat_shapes_ok(const mt_op_args *a, int32_t axis, uint32_t yd[4])
{
  const mt_tensor *yt = &a->out[MT_CONCAT_OUT_Y];
  const int32_t lead = mt_dims4(yt, yd);
  uint64_t total = 0;
  if (lead < 0 || axis < lead || axis > 3 || !mt_tensor_ok(yt, yt->rec->dtype, yt->rec->rank) ||
      (yt->rec->dtype != MT_DTYPE_INT8 && yt->rec->dtype != MT_DTYPE_INT16)) {
    return 0;
  }
  for (uint16_t k = 0; k < a->n_in; k++) {
    uint32_t xd[4];
    if (mt_dims4(&a->in[k], xd) != lead ||
        !mt_tensor_ok(&a->in[k], yt->rec->dtype, yt->rec->rank)) {
      return 0;
    }
    for (int32_t i = 0; i < 4; i++) {
      if (i != axis && xd[i] != yd[i]) {
        return 0;
      }
    }
    total += xd[axis];
  }
  return total == yd[axis];
}

// xs: k >= 1 tensors of rank r, equal except along axis  ->  y: rank r, their dtype
mt_status mt_concat_s8(const mt_op_args *args)
{
  uint32_t yd[4];
  if (args == NULL || args->in == NULL || args->out == NULL || args->attrs == NULL ||
      args->n_in < 1 || args->n_out != MT_CONCAT_N_OUTPUTS || args->n_attrs != MT_CONCAT_N_ATTRS) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t axis = args->attrs[MT_CONCAT_AXIS];
  if (!concat_shapes_ok(args, axis, yd)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  size_t outer = 1,
         inner = args->out[MT_CONCAT_OUT_Y].rec->dtype == MT_DTYPE_INT16 ? 2 : 1; /* bytes */
  for (int32_t i = 0; i < 4; i++) {
    if (i < axis) {
      outer *= yd[i];
    } else if (i > axis) {
      inner *= yd[i];
    }
  }
  int8_t *y = (int8_t *)args->out[MT_CONCAT_OUT_Y].data;
  for (size_t o = 0; o < outer; o++) {
    for (uint16_t k = 0; k < args->n_in; k++) {
      const mt_tensor *xt = &args->in[k];
      const size_t block = (size_t)xt->rec->shape[xt->rec->rank - 4 + axis] * inner;
      memcpy(y, (const int8_t *)xt->data + o * block, block);
      y += block;
    }
  }
  return MT_STATUS_OK;
}
