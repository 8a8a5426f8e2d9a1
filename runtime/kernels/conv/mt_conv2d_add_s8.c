/*
 * mt_conv2d_add_s8.c - conv2d with the residual add fused into its output stage:
 * y = add(conv2d(x), skip), bit for bit the two ops it replaces.
 *
 * The conv runs in blocks of whole output rows: mt_conv2d_s8 (all its MVE / DSP / C paths) on
 * the input rows the block's windows read (a view of x, padding re-derived for the block)
 * writes the block to the planned scratch, then mt_add_s8 adds it to the same rows of skip and
 * writes y's rows. y may be skip's bytes (alias kind residual): a row of skip is read only by
 * the add of its own block, before y's row is written, and never after. x must not meet y (both
 * program readers check it). Scratch: at least one output row (Wo * Cout bytes); each block is
 * scratch_size / (Wo * Cout) rows (backends/cortex_m.scratch_bytes).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* the conv part of the attributes is conv2d's, then add's: each kernel reads its own slice */
#if MT_CONV2D_ADD_A_ZP != MT_CONV2D_N_ATTRS ||                                                     \
    MT_CONV2D_ADD_ACT_MAX + 1 != MT_CONV2D_N_ATTRS + MT_ADD_N_ATTRS
#error "conv2d_add attributes must be conv2d's followed by add's"
#endif /* attribute layout */

typedef struct {
  mt_tensor in[MT_CONV2D_N_INPUTS], y, a, b, sum;
  int32_t attrs[MT_CONV2D_N_ATTRS];
} conv_add_block;

/* The conv2d of output rows [oh0, oh0 + rows) of image n: x's rows its windows reach. */
static void conv_add_view(conv_add_block *k, const mt_op_args *args, uint32_t n, int32_t oh0,
                          int32_t rows)
{
  const mt_tensor *x = &args->in[MT_CONV2D_ADD_IN_X], *w = &args->in[MT_CONV2D_ADD_IN_WEIGHT];
  const int32_t *at = args->attrs;
  const int64_t sh = at[MT_CONV2D_ADD_STRIDE_H], dh = at[MT_CONV2D_ADD_DILATION_H];
  const int64_t h = x->shape[1], span = (int64_t)(rows - 1) * sh + dh * ((int64_t)w->shape[1] - 1);
  const int64_t start = (int64_t)oh0 * sh - at[MT_CONV2D_ADD_PAD_TOP];
  int64_t r0 = start < 0 ? 0 : start, r1 = start + span + 1 < h ? start + span + 1 : h;
  if (r1 <= r0) { /* every window of the block lies in the padding */
    r0 = r1 = 0;
  }
  const size_t row = (size_t)x->shape[2] * x->shape[3];
  for (int i = 0; i < MT_CONV2D_N_INPUTS; i++) {
    k->in[i] = args->in[i];
  }
  k->in[MT_CONV2D_IN_X].data = (int8_t *)x->data + ((size_t)n * h + (size_t)r0) * row;
  k->in[MT_CONV2D_IN_X].shape[0] = 1;
  k->in[MT_CONV2D_IN_X].shape[1] = (uint32_t)(r1 - r0);
  k->in[MT_CONV2D_IN_X].size = (uint32_t)((size_t)(r1 - r0) * row);
  for (int i = 0; i < MT_CONV2D_N_ATTRS; i++) {
    k->attrs[i] = at[i];
  }
  const int64_t top = r1 > r0 ? r0 - start : 0; /* in [0, pad_top] */
  k->attrs[MT_CONV2D_PAD_TOP] = (int32_t)top;
  k->attrs[MT_CONV2D_PAD_BOTTOM] = (int32_t)(span + 1 - (r1 - r0) - top);
}

/* t: rows [oh0, oh0 + rows) of image n of the 4-D tensor src, data at `data`. */
static void conv_add_rows(mt_tensor *t, const mt_tensor *src, void *data, int32_t rows)
{
  *t = *src;
  t->data = data;
  t->shape[0] = 1;
  t->shape[1] = (uint32_t)rows;
  t->size = (uint32_t)rows * src->shape[2] * src->shape[3];
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI); bias, mult, shift:
// (Cout,) int32; skip: (N, Ho, Wo, Cout) int8  ->  y: (N, Ho, Wo, Cout) int8, may be skip
mt_status mt_conv2d_add_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_CONV2D_ADD_N_INPUTS, MT_CONV2D_ADD_N_OUTPUTS, MT_CONV2D_ADD_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *x = &args->in[MT_CONV2D_ADD_IN_X], *skip = &args->in[MT_CONV2D_ADD_IN_SKIP];
  const mt_tensor *y = &args->out[MT_CONV2D_ADD_OUT_Y], *w = &args->in[MT_CONV2D_ADD_IN_WEIGHT];
  const int32_t *at = args->attrs;
  mt_axis ah; /* the whole H axis; each block's conv checks its own rows and the W axis */
  if (!mt_tensor_ok(x, MT_DTYPE_INT8, 4) || !mt_tensor_ok(skip, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_axis_init(&ah, x->shape[1], mt_dim(w->shape[1]), at[MT_CONV2D_ADD_STRIDE_H],
                    at[MT_CONV2D_ADD_DILATION_H], at[MT_CONV2D_ADD_PAD_TOP],
                    at[MT_CONV2D_ADD_PAD_BOTTOM], y->shape[1]) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, 4) || mt_dim(x->shape[1]) < 0 || mt_dim(x->shape[2]) < 0 ||
      mt_dim(x->shape[3]) < 0 || x->shape[0] != y->shape[0] || mt_dim(y->shape[1]) < 0 ||
      (uint64_t)y->shape[2] * y->shape[3] > MT_DIM_MAX) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  for (int d = 0; d < 4; d++) {
    if (skip->shape[d] != y->shape[d]) {
      return MT_STATUS_BAD_ARGUMENT;
    }
  }
  const uint32_t row = y->shape[2] * y->shape[3]; /* bytes of one output row */
  const int32_t ho = (int32_t)y->shape[1];
  int32_t per = row == 0 ? ho : (int32_t)(args->scratch_size / row);
  if (y->size == 0) {
    return MT_STATUS_OK;
  }
  if (args->scratch == NULL || per < 1) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  per = per < ho ? per : ho;
  conv_add_block k;
  mt_op_args conv = {k.in, &k.sum, k.attrs, NULL, 0, MT_CONV2D_N_INPUTS, 1, MT_CONV2D_N_ATTRS};
  mt_tensor add_in[2];
  mt_op_args add = {add_in, &k.y, args->attrs + MT_CONV2D_N_ATTRS, NULL, 0, 2, 1, MT_ADD_N_ATTRS};
  for (uint32_t n = 0; n < y->shape[0]; n++) {
    for (int32_t oh = 0; oh < ho; oh += per) {
      const int32_t rows = ho - oh < per ? ho - oh : per;
      const size_t off = ((size_t)n * (size_t)ho + (size_t)oh) * row;
      conv_add_view(&k, args, n, oh, rows);
      conv_add_rows(&k.sum, y, args->scratch, rows);
      k.sum.zero_point = args->attrs[MT_CONV2D_ADD_CONV_ZP];
      mt_status s = mt_conv2d_s8(&conv);
      if (s != MT_STATUS_OK) {
        return s;
      }
      add_in[0] = k.sum;
      conv_add_rows(&add_in[1], skip, (int8_t *)skip->data + off, rows);
      conv_add_rows(&k.y, y, (int8_t *)y->data + off, rows);
      s = mt_add_s8(&add);
      if (s != MT_STATUS_OK) {
        return s;
      }
    }
  }
  return MT_STATUS_OK;
}
