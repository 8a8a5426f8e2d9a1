/*
 * mt_gather_s8.c - y[..., j, ...] = x[..., indices[j], ...] along one dim of an int8 tensor of
 * rank 1..6 (addressed as 6-D with unit dims prepended): for each outer index, one memcpy of
 * the inner block per index. Every index is checked in [0, n_axis) before anything is written.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define GATHER_RANK 6

/* 1 when axis names a dim of x, the indices are a non-empty int32 vector of values in
 * [0, x's dim), and y is x with that dim replaced by the index count; fills the outer count, the
 * axis length and the inner block size (elements). */
static int gather_plan(const mt_op_args *a, size_t *outer, uint32_t *n, size_t *inner)
{
  const mt_tensor *xt = &a->in[MT_GATHER_IN_X], *it = &a->in[MT_GATHER_IN_INDICES];
  const mt_tensor *yt = &a->out[MT_GATHER_OUT_Y];
  if (xt->rec->rank < 1 || xt->rec->rank > GATHER_RANK ||
      !mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, xt->rec->rank) || !mt_tensor_ok(it, MT_DTYPE_INT32, 1) ||
      it->rec->shape[0] < 1) {
    return 0;
  }
  const int32_t axis = a->attrs[MT_GATHER_AXIS] - (GATHER_RANK - (int32_t)xt->rec->rank);
  if (axis < 0 || axis >= (int32_t)xt->rec->rank) { /* the dim of x that axis names */
    return 0;
  }
  *outer = 1;
  *inner = 1;
  for (int32_t k = 0; k < (int32_t)xt->rec->rank; k++) {
    if (yt->rec->shape[k] != (k == axis ? it->rec->shape[0] : xt->rec->shape[k])) {
      return 0;
    }
    if (k < axis) {
      *outer *= xt->rec->shape[k];
    } else if (k > axis) {
      *inner *= xt->rec->shape[k];
    }
  }
  *n = xt->rec->shape[axis];
  const int32_t *idx = (const int32_t *)it->data;
  for (uint32_t j = 0; j < it->rec->shape[0]; j++) {
    if (idx[j] < 0 || (uint32_t)idx[j] >= *n) {
      return 0;
    }
  }
  return 1;
}

// x: rank r <= 6, int8; indices: (W,) int32  ->  y: x's shape with dim `axis` of size W
mt_status mt_gather_s8(const mt_op_args *args)
{
  size_t outer, inner;
  uint32_t n;
  if (!mt_args_ok(args, MT_GATHER_N_INPUTS, MT_GATHER_N_OUTPUTS, MT_GATHER_N_ATTRS) ||
      !gather_plan(args, &outer, &n, &inner)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)args->in[MT_GATHER_IN_X].data;
  const int32_t *idx = (const int32_t *)args->in[MT_GATHER_IN_INDICES].data;
  const uint32_t w = args->in[MT_GATHER_IN_INDICES].rec->shape[0];
  int8_t *y = (int8_t *)args->out[MT_GATHER_OUT_Y].data;
  for (size_t o = 0; o < outer; o++) {
    const int8_t *xo = x + o * n * inner;
    for (uint32_t j = 0; j < w; j++) {
      memcpy(y, xo + (size_t)idx[j] * inner, inner);
      y += inner;
    }
  }
  return MT_STATUS_OK;
}
