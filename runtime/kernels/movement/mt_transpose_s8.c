/*
 * mt_transpose_s8.c - y = x4.transpose(perm) for int8 (and int16) tensors of rank 1..4, addressed
 * as 4-D with unit dims prepended (perm must keep those in place). The output is written in order,
 * one innermost run at a time; outer output dims that continue the innermost run in x (or are 1)
 * are merged into it first, so a run is as long as the layout allows.
 * A run of x stride 1 is a copy (MVE: 16 bytes per VLDRB/VSTRB pair, a predicated tail). Strided
 * runs on MVE: one byte gather (VLDRB gather, offsets k * stride) per 16 output bytes while the
 * offsets fit in u8 (stride <= 17), per 8 in u16 lanes, else per 4 in u32 lanes, each stored
 * narrowed by one VSTRB; the tail of a run is one predicated gather and store, a run of 1-2
 * bytes is copied without vectors. Cores with unaligned word access (and the host): four bytes
 * read, one word written. Armv6-M: four byte copies per step. int16 (a16w8, docs/numerics.md
 * section 6): the same plan and merged runs, one element at a time (plain C).
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
  if (lead < 0 || mt_dims4(yt, yd) != lead || !mt_tensor_ok(yt, xt->rec->dtype, yt->rec->rank) ||
      (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) &&
       !mt_tensor_ok(xt, MT_DTYPE_INT16, xt->rec->rank))) {
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

/* Folds output dims 2, 1, 0 (innermost first) into dim 3 while each is 1 or steps in x exactly
 * one whole run of dim 3; the merged dims become 1. y's order is unchanged. */
static void transpose_merge(uint32_t yd[4], size_t step[4])
{
  for (int32_t k = 2; k >= 0; k--) {
    if (yd[k] == 1) {
      continue;
    }
    if (yd[3] == 1) {
      step[3] = step[k];
    } else if (step[k] != step[3] * yd[3]) {
      return;
    }
    yd[3] *= yd[k];
    yd[k] = 1;
  }
}

#if MT_MVE
/* y[0..n) = x[0], x[s], x[2 s], ... (n, s >= 1); y and x do not overlap. The u32 offsets of the
 * active lanes (k s for k < n) stay inside x, so they never wrap. */
static MT_NOINLINE void transpose_run(int8_t *y, const int8_t *x, uint32_t n, size_t s)
{
  uint32_t i = 0;
  if (n <= 2) { /* a vector set-up costs more than these byte copies */
    y[0] = x[0];
    if (n == 2) {
      y[1] = x[s];
    }
  } else if (s == 1) {
    for (; i + 16 <= n; i += 16) {
      vstrbq_s8(y + i, vldrbq_s8(x + i));
    }
    const mve_pred16_t p = vctp8q(n - i);
    vstrbq_p_s8(y + i, vldrbq_z_s8(x + i, p), p);
  } else if (s <= 17) { /* offsets 0 .. 15 s fit in u8 */
    const uint8x16_t at = vmulq_n_u8(vidupq_n_u8(0, 1), (uint8_t)s);
    for (; i + 16 <= n; i += 16, x += 16 * s) {
      vstrbq_s8(y + i, vldrbq_gather_offset_s8(x, at));
    }
    const mve_pred16_t p = vctp8q(n - i);
    vstrbq_p_s8(y + i, vldrbq_gather_offset_z_s8(x, at, p), p);
  } else if (s <= 65535 / 7) { /* offsets 0 .. 7 s fit in u16 */
    const uint16x8_t at = vmulq_n_u16(vidupq_n_u16(0, 1), (uint16_t)s);
    for (; i + 8 <= n; i += 8, x += 8 * s) {
      vstrbq_u16((uint8_t *)y + i, vldrbq_gather_offset_u16((const uint8_t *)x, at));
    }
    const mve_pred16_t p = vctp16q(n - i);
    vstrbq_p_u16((uint8_t *)y + i, vldrbq_gather_offset_z_u16((const uint8_t *)x, at, p), p);
  } else {
    const uint32x4_t at = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)s);
    for (; i + 4 <= n; i += 4, x += 4 * s) {
      vstrbq_u32((uint8_t *)y + i, vldrbq_gather_offset_u32((const uint8_t *)x, at));
    }
    const mve_pred16_t p = vctp32q(n - i);
    vstrbq_p_u32((uint8_t *)y + i, vldrbq_gather_offset_z_u32((const uint8_t *)x, at, p), p);
  }
}
#else /* !MT_MVE */
/* y[0..n) = x[0], x[s], x[2 s], ... (s >= 1); y and x do not overlap. */
static void transpose_run(int8_t *y, const int8_t *x, uint32_t n, size_t s)
{
  uint32_t i = 0;
  if (s == 1) {
    memcpy(y, x, n);
    return;
  }
#if defined(__ARM_FEATURE_UNALIGNED) || !defined(__arm__)
  for (; i + 4 <= n; i += 4, x += 4 * s) {
    const uint8_t *b = (const uint8_t *)x;
    const uint32_t w =
        (uint32_t)b[0] | (uint32_t)b[s] << 8 | (uint32_t)b[2 * s] << 16 | (uint32_t)b[3 * s] << 24;
    __builtin_memcpy(y + i, &w, 4); /* little-endian: y[i] = x[0] */
  }
#endif /* unaligned word access */
  for (; i + 4 <= n; i += 4, x += 4 * s) {
    const int8_t a = x[0], b = x[s], c = x[2 * s], d = x[3 * s];
    y[i] = a;
    y[i + 1] = b;
    y[i + 2] = c;
    y[i + 3] = d;
  }
  for (; i < n; i++, x += s) {
    y[i] = *x;
  }
}
#endif /* MT_MVE */

/* The int16 runs of the merged plan, one element at a time. */
static void transpose_s16(int16_t *y, const int16_t *x, const uint32_t yd[4], const size_t step[4])
{
  for (uint32_t i0 = 0; i0 < yd[0]; i0++) {
    for (uint32_t i1 = 0; i1 < yd[1]; i1++) {
      for (uint32_t i2 = 0; i2 < yd[2]; i2++) {
        const int16_t *xr = x + i0 * step[0] + i1 * step[1] + i2 * step[2];
        for (uint32_t i = 0; i < yd[3]; i++) {
          *y++ = xr[i * step[3]];
        }
      }
    }
  }
}

// x: rank r <= 4, int8 or int16  ->  y: rank r, x's dtype, y4.shape[k] = x4.shape[perm_k]
mt_status mt_transpose_s8(const mt_op_args *args)
{
  uint32_t yd[4];
  size_t step[4];
  if (!mt_args_ok(args, MT_TRANSPOSE_N_INPUTS, MT_TRANSPOSE_N_OUTPUTS, MT_TRANSPOSE_N_ATTRS) ||
      !transpose_plan(args, yd, step)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  transpose_merge(yd, step);
  const int8_t *x = (const int8_t *)args->in[MT_TRANSPOSE_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_TRANSPOSE_OUT_Y].data;
  if (yd[3] == 0) {
    return MT_STATUS_OK;
  }
  if (args->in[MT_TRANSPOSE_IN_X].rec->dtype == MT_DTYPE_INT16) {
    transpose_s16((int16_t *)(void *)y, (const int16_t *)(const void *)x, yd, step);
    return MT_STATUS_OK;
  }
  for (uint32_t i0 = 0; i0 < yd[0]; i0++) {
    for (uint32_t i1 = 0; i1 < yd[1]; i1++) {
      for (uint32_t i2 = 0; i2 < yd[2]; i2++) {
        transpose_run(y, x + i0 * step[0] + i1 * step[1] + i2 * step[2], yd[3], step[3]);
        y += yd[3];
      }
    }
  }
  return MT_STATUS_OK;
}
