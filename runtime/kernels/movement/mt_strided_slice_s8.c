/*
 * mt_strided_slice_s8.c - y[i] = x[start + i * step] along every dim of int8 or int16 tensors
 * (a16w8, docs/numerics.md section 6) of rank 1..6, addressed as 6-D with unit dims prepended.
 * Steps may be negative (flip) or 0 (one element repeated, as expand). The output is written in
 * order, one innermost run at a time: a memcpy when the innermost step is 1, a strided element loop
 * otherwise.
 *
 * Positions along a dim are kept as uint32_t and advanced by the step with wrap-around: every
 * position read lies between start and the last one, both checked in [0, dim), so the wrapped
 * value is the exact one; an offset sum_k pos_k * stride_k is below the element count of x.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define SLICE_RANK 6

/* x's and y's dims as 6-D (unit dims prepended); the number prepended, or -1. */
static int32_t dims6(const mt_tensor *t, uint8_t dtype, uint32_t d6[SLICE_RANK])
{
  if (t->rec->rank < 1 || t->rec->rank > SLICE_RANK || !mt_tensor_ok(t, dtype, t->rec->rank) ||
      (dtype != MT_DTYPE_INT8 && dtype != MT_DTYPE_INT16)) {
    return -1;
  }
  const int32_t lead = SLICE_RANK - t->rec->rank;
  for (int32_t i = 0; i < SLICE_RANK; i++) {
    d6[i] = i < lead ? 1u : t->rec->shape[i - lead];
  }
  return lead;
}

/* 1 when every (start, step, size) is in the domain (docs/numerics.md) for x, and y's dims are
 * the sizes; fills x's strides in elements. */
static int slice_plan(const mt_op_args *a, uint32_t yd[SLICE_RANK], size_t xs[SLICE_RANK])
{
  uint32_t xd[SLICE_RANK];
  const uint8_t dtype = a->in[MT_STRIDED_SLICE_IN_X].rec->dtype;
  const int32_t lead = dims6(&a->in[MT_STRIDED_SLICE_IN_X], dtype, xd);
  if (lead < 0 || dims6(&a->out[MT_STRIDED_SLICE_OUT_Y], dtype, yd) != lead) {
    return 0;
  }
  xs[SLICE_RANK - 1] = 1;
  for (int32_t k = SLICE_RANK - 2; k >= 0; k--) {
    xs[k] = xs[k + 1] * xd[k + 1];
  }
  for (int32_t k = 0; k < SLICE_RANK; k++) {
    const int64_t start = a->attrs[MT_STRIDED_SLICE_START0 + k];
    const int64_t step = a->attrs[MT_STRIDED_SLICE_STEP0 + k];
    const int64_t size = a->attrs[MT_STRIDED_SLICE_SIZE0 + k];
    const int64_t n = xd[k];
    const int64_t last = start + (size - 1) * step; /* |.| < 2^63: int32 attributes */
    if (size < 1 || (uint64_t)size != yd[k] || start < 0 || start >= n || step < -n || step > n ||
        last < 0 || last >= n) {
      return 0;
    }
  }
  return 1;
}

// x: rank r <= 6, int8 or int16  ->  y: rank r, x's dtype, y6[i] = x6[start + i * step] per dim
mt_status mt_strided_slice_s8(const mt_op_args *args)
{
  uint32_t yd[SLICE_RANK];
  size_t xs[SLICE_RANK];
  if (!mt_args_ok(args, MT_STRIDED_SLICE_N_INPUTS, MT_STRIDED_SLICE_N_OUTPUTS,
                  MT_STRIDED_SLICE_N_ATTRS) ||
      !slice_plan(args, yd, xs)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *start = &args->attrs[MT_STRIDED_SLICE_START0];
  const int32_t *step = &args->attrs[MT_STRIDED_SLICE_STEP0];
  const size_t es = args->in[MT_STRIDED_SLICE_IN_X].rec->dtype == MT_DTYPE_INT16 ? 2 : 1;
  const int8_t *x = (const int8_t *)args->in[MT_STRIDED_SLICE_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_STRIDED_SLICE_OUT_Y].data;
  uint32_t idx[SLICE_RANK - 1], pos[SLICE_RANK - 1];
  size_t runs = 1;
  for (int32_t k = 0; k < SLICE_RANK - 1; k++) {
    idx[k] = 0;
    pos[k] = (uint32_t)start[k];
    runs *= yd[k];
  }
  const uint32_t n = yd[SLICE_RANK - 1], step5 = (uint32_t)step[SLICE_RANK - 1];
  for (size_t r = 0; r < runs; r++) {
    size_t off = 0;
    for (int32_t k = 0; k < SLICE_RANK - 1; k++) {
      off += (size_t)pos[k] * xs[k];
    }
    const int8_t *xr = x + off * es;
    uint32_t p = (uint32_t)start[SLICE_RANK - 1];
    if (step5 == 1u) {
      memcpy(y, xr + p * es, n * es);
    } else {
      for (uint32_t i = 0; i < n; i++) { /* p wraps past the last position only, never read */
        if (es == 2) {
          ((int16_t *)(void *)y)[i] = ((const int16_t *)(const void *)xr)[p];
        } else {
          y[i] = xr[p];
        }
        p += step5;
      }
    }
    y += n * es;
    for (int32_t k = SLICE_RANK - 2; k >= 0; k--) { /* the next run: an odometer over dims 0..4 */
      if (++idx[k] < yd[k]) {
        pos[k] += (uint32_t)step[k];
        break;
      }
      idx[k] = 0;
      pos[k] = (uint32_t)start[k];
    }
  }
  return MT_STATUS_OK;
}
