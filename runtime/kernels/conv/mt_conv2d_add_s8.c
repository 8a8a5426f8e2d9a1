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
  mt_tensor in[MT_CONV2D_N_INPUTS], sum, add_in[2], y; /* the two calls' operands */
  int32_t attrs[MT_CONV2D_N_ATTRS];
  size_t x_row, y_row; /* bytes of one row of x, of y */
} conv_add_block;

/* The operands of both calls once: conv2d's (x a view of one image, y the scratch), add's. */
static void conv_add_init(conv_add_block *k, const mt_op_args *args)
{
  const mt_tensor *x = &args->in[MT_CONV2D_ADD_IN_X], *y = &args->out[MT_CONV2D_ADD_OUT_Y];
  for (int i = 0; i < MT_CONV2D_N_INPUTS; i++) {
    k->in[i] = args->in[i];
  }
  for (int i = 0; i < MT_CONV2D_N_ATTRS; i++) {
    k->attrs[i] = args->attrs[i];
  }
  k->x_row = (size_t)x->shape[2] * x->shape[3];
  k->y_row = (size_t)y->shape[2] * y->shape[3];
  k->in[MT_CONV2D_IN_X].shape[0] = 1;
  k->sum = *y;
  k->sum.data = args->scratch;
  k->sum.shape[0] = 1;
  k->add_in[1] = args->in[MT_CONV2D_ADD_IN_SKIP];
  k->add_in[1].shape[0] = 1;
  k->y = *y;
  k->y.shape[0] = 1;
}

/* Output rows [oh0, oh0 + rows) of image n: the conv reads the x rows its windows reach (the
 * padding re-derived), the add reads and writes those rows of skip and y. */
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
  mt_tensor *xv = &k->in[MT_CONV2D_IN_X];
  xv->data = (int8_t *)x->data + ((size_t)n * (size_t)h + (size_t)r0) * k->x_row;
  xv->shape[1] = (uint32_t)(r1 - r0);
  xv->size = (uint32_t)((size_t)(r1 - r0) * k->x_row);
  const int64_t top = r1 > r0 ? r0 - start : 0; /* in [0, pad_top] */
  k->attrs[MT_CONV2D_PAD_TOP] = (int32_t)top;
  k->attrs[MT_CONV2D_PAD_BOTTOM] = (int32_t)(span + 1 - (r1 - r0) - top);
  const size_t off = ((size_t)n * args->out[0].shape[1] + (size_t)oh0) * k->y_row;
  const uint32_t bytes = (uint32_t)((size_t)rows * k->y_row);
  k->add_in[1].data = (int8_t *)args->in[MT_CONV2D_ADD_IN_SKIP].data + off;
  k->y.data = (int8_t *)args->out[MT_CONV2D_ADD_OUT_Y].data + off;
  k->sum.shape[1] = k->add_in[1].shape[1] = k->y.shape[1] = (uint32_t)rows;
  k->sum.size = k->add_in[1].size = k->y.size = bytes;
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
  const uint32_t fit = row == 0 ? (uint32_t)ho : args->scratch_size / row; /* rows per block */
  const int32_t per = fit < (uint32_t)ho ? (int32_t)fit : ho;
  if (y->size == 0) {
    return MT_STATUS_OK;
  }
  if (args->scratch == NULL || per < 1) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  conv_add_block k;
  conv_add_init(&k, args);
  const mt_op_args conv = {.in = k.in,
                           .out = &k.sum,
                           .attrs = k.attrs,
                           .n_in = MT_CONV2D_N_INPUTS,
                           .n_out = 1,
                           .n_attrs = MT_CONV2D_N_ATTRS};
  const mt_op_args add = {.in = k.add_in,
                          .out = &k.y,
                          .attrs = args->attrs + MT_CONV2D_N_ATTRS,
                          .n_in = 2,
                          .n_out = 1,
                          .n_attrs = MT_ADD_N_ATTRS};
  for (uint32_t n = 0; n < y->shape[0]; n++) {
    for (int32_t oh = 0; oh < ho; oh += per) {
      conv_add_view(&k, args, n, oh, ho - oh < per ? ho - oh : per);
      mt_status s = mt_conv2d_s8(&conv);
      if (s == MT_STATUS_OK) {
        k.add_in[0] = k.sum;
        s = mt_add_s8(&add);
      }
      if (s != MT_STATUS_OK) {
        return s;
      }
    }
  }
  return MT_STATUS_OK;
}
