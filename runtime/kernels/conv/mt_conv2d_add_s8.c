/*
 * mt_conv2d_add_s8.c - conv2d with the residual add fused in: y = add(conv2d(x), skip), bit for
 * bit the two ops it replaces (the conv's int8 output, conv_zp clamped to [conv_min, conv_max],
 * is add's a, skip's byte at the same position its b). y may be skip's bytes (alias kind
 * residual): every position is stored once, after its skip byte is read. x must not meet y (both
 * program readers check it). Which way depends on the conv's path (bench/residual.py measures):
 *
 *   gathered windows (groups 1, dilation_w 1, 1 < KH * KW, window <= MT_CONV_WIN_MAX bytes):
 *            one mt_conv2d_s8 pass; spans of whole pixels go to the scratch ("stage") and add's
 *            own loop adds each to skip (mt_conv_gather.h), or, on Armv6-M / Armv8-M Baseline
 *            (MT_ADD_STAGED 0) or without a stage of MT_PX pixels, the conv's output stage adds
 *            the residual (mt_kernel_add_stage.h): no intermediate byte written or read
 *   other    (1x1, dilated, grouped, large windows): blocks of whole output rows, each a
 *            mt_conv2d_s8 call on the rows of x its windows read (padding re-derived) into the
 *            scratch, then add's loop onto skip; with a scratch under one row, and on Armv6-M
 *            for all but 1x1 convs, the output stage
 *
 * Scratch: backends/cortex_m.scratch_bytes (CONV_ADD_STAGE bytes of whole pixels, at least one
 * output row).
 */
#include "mt_kernel_add_stage.h"
#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* the conv part of the attributes is conv2d's, then add's: each stage reads its own slice */
#if MT_CONV2D_ADD_A_ZP != MT_CONV2D_N_ATTRS ||                                                     \
    MT_CONV2D_ADD_ACT_MAX + 1 != MT_CONV2D_N_ATTRS + MT_ADD_N_ATTRS
#error "conv2d_add attributes must be conv2d's followed by add's"
#endif /* attribute layout */

/* 1 when mt_conv2d_s8 takes this conv through its gathered windows (mt_conv2d_s8.c, conv_init). */
static int conv_add_gathers(const mt_op_args *args)
{
  const int32_t *at = args->attrs;
  const mt_tensor *w = &args->in[MT_CONV2D_ADD_IN_WEIGHT];
  const uint64_t taps = (uint64_t)w->rec->shape[1] * w->rec->shape[2];
  return at[MT_CONV2D_ADD_GROUPS] == 1 && at[MT_CONV2D_ADD_DILATION_W] == 1 && taps > 1 &&
         taps * w->rec->shape[3] <= MT_CONV_WIN_MAX;
}

/* Row blocks: the conv of `rows` output rows at a time into the scratch, then add's loop. */
static mt_status conv_add_blocks(const mt_op_args *args, uint32_t rows)
{
  const mt_tensor *x = &args->in[MT_CONV2D_ADD_IN_X], *w = &args->in[MT_CONV2D_ADD_IN_WEIGHT];
  const mt_tensor *y = &args->out[MT_CONV2D_ADD_OUT_Y];
  const int32_t *at = args->attrs;
  mt_tensor in[MT_CONV2D_N_INPUTS], out = *y;
  mt_tensor_t x_rows = *x->rec, y_rows = *y->rec; /* one block of rows of x and of y */
  int32_t attrs[MT_CONV2D_N_ATTRS];
  __builtin_memcpy(in, args->in, sizeof in);
  __builtin_memcpy(attrs, at, sizeof attrs);
  const mt_op_args conv = {in, &out, attrs, NULL, 0, MT_CONV2D_N_INPUTS, 1, MT_CONV2D_N_ATTRS, 0};
  const size_t x_row = (size_t)x->rec->shape[2] * x->rec->shape[3],
               y_row = (size_t)y->rec->shape[2] * y->rec->shape[3];
  const int64_t h = x->rec->shape[1], sh = at[MT_CONV2D_ADD_STRIDE_H];
  const int64_t reach = at[MT_CONV2D_ADD_DILATION_H] * ((int64_t)w->rec->shape[1] - 1);
  x_rows.shape[0] = y_rows.shape[0] = 1;
  in[MT_CONV2D_IN_X].rec = &x_rows;
  out.rec = &y_rows;
  out.data = args->scratch;
  for (uint32_t n = 0; n < y->rec->shape[0]; n++) {
    for (uint32_t oh = 0; oh < y->rec->shape[1]; oh += rows) {
      const uint32_t nr = y->rec->shape[1] - oh < rows ? y->rec->shape[1] - oh : rows;
      /* the x rows the block's windows reach, the padding re-derived */
      const int64_t span = (int64_t)(nr - 1) * sh + reach, start = oh * sh - at[MT_CONV2D_PAD_TOP];
      int64_t r0 = start < 0 ? 0 : start, r1 = start + span + 1 < h ? start + span + 1 : h;
      if (r1 <= r0) { /* every window of the block lies in the padding */
        r0 = r1 = 0;
      }
      in[MT_CONV2D_IN_X].data = (int8_t *)x->data + ((size_t)n * (size_t)h + (size_t)r0) * x_row;
      x_rows.shape[1] = (uint32_t)(r1 - r0);
      x_rows.size = (uint32_t)((size_t)(r1 - r0) * x_row);
      const int64_t top = r1 > r0 ? r0 - start : 0; /* in [0, pad_top] */
      attrs[MT_CONV2D_PAD_TOP] = (int32_t)top;
      attrs[MT_CONV2D_PAD_BOTTOM] = (int32_t)(span + 1 - (r1 - r0) - top);
      y_rows.shape[1] = nr;
      y_rows.size = (uint32_t)(nr * y_row);
      const mt_status s = mt_conv2d_s8(&conv);
      if (s != MT_STATUS_OK) {
        return s;
      }
      const size_t off = ((size_t)n * y->rec->shape[1] + oh) * y_row;
      mt_add_same_s8(args->scratch, (const int8_t *)args->in[MT_CONV2D_ADD_IN_SKIP].data + off,
                     (int8_t *)y->data + off, out.rec->size, at + MT_CONV2D_N_ATTRS);
    }
  }
  return MT_STATUS_OK;
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI); bias, mult, shift:
// (Cout,) int32; skip: (N, Ho, Wo, Cout) int8  ->  y: (N, Ho, Wo, Cout) int8, may be skip
mt_status mt_conv2d_add_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_CONV2D_ADD_N_INPUTS, MT_CONV2D_ADD_N_OUTPUTS, MT_CONV2D_ADD_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *skip = &args->in[MT_CONV2D_ADD_IN_SKIP], *y = &args->out[MT_CONV2D_ADD_OUT_Y];
  const mt_tensor *x = &args->in[MT_CONV2D_ADD_IN_X], *w = &args->in[MT_CONV2D_ADD_IN_WEIGHT];
  const int32_t *add_at = args->attrs + MT_CONV2D_N_ATTRS;
  if (!mt_tensor_ok(skip, MT_DTYPE_INT8, 4) || !mt_tensor_ok(y, MT_DTYPE_INT8, 4) ||
      !mt_addsub_attrs_ok(add_at, 0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  for (int d = 0; d < 4; d++) {
    if (skip->rec->shape[d] != y->rec->shape[d]) {
      return MT_STATUS_BAD_ARGUMENT;
    }
  }
  if (!conv_add_gathers(args)) { /* row blocks, when a row fits the scratch */
    const uint64_t row = (uint64_t)y->rec->shape[2] * y->rec->shape[3];
    const int32_t *at = args->attrs;
    mt_axis ah; /* the whole H axis; each block's conv checks its own rows and the W axis */
    if ((MT_ADD_STAGED || (w->rec->shape[1] == 1 && w->rec->shape[2] == 1)) &&
        args->scratch != NULL && row > 0 && row <= args->scratch_size &&
        mt_tensor_ok(x, MT_DTYPE_INT8, 4) && mt_tensor_ok(w, MT_DTYPE_INT8, 4) &&
        x->rec->shape[0] == y->rec->shape[0] && mt_dim(x->rec->shape[2]) >= 0 &&
        mt_dim(x->rec->shape[3]) >= 0 &&
        mt_axis_init(&ah, x->rec->shape[1], mt_dim(w->rec->shape[1]), at[MT_CONV2D_ADD_STRIDE_H],
                     at[MT_CONV2D_ADD_DILATION_H], at[MT_CONV2D_ADD_PAD_TOP],
                     at[MT_CONV2D_ADD_PAD_BOTTOM], y->rec->shape[1])) { /* Armv6-M: 1x1 only */
      return conv_add_blocks(args, (uint32_t)(args->scratch_size / row));
    }
  }
  mt_add_stage stage; /* conv2d's own checks (shapes, attributes) follow in mt_conv2d_stage_s8 */
  mt_add_stage_init(&stage, add_at, args->attrs[MT_CONV2D_ADD_CONV_ZP], (const int8_t *)skip->data,
                    (const int8_t *)y->data);
  stage.same = mt_add_same_s8;
  stage.gathered = mt_conv_gathered_add;
  const mt_op_args conv = {.in = args->in,
                           .out = args->out,
                           .attrs = args->attrs,
                           .scratch = args->scratch,
                           .scratch_size = args->scratch_size,
                           .n_in = MT_CONV2D_N_INPUTS,
                           .n_out = 1,
                           .n_attrs = MT_CONV2D_N_ATTRS};
  return mt_conv2d_stage_s8(&conv, &stage);
}
