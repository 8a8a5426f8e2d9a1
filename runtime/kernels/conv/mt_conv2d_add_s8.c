/*
 * mt_conv2d_add_s8.c - conv2d with the residual add fused into its output stage:
 * y = add(conv2d(x), skip), bit for bit the two ops it replaces.
 *
 * One pass of mt_conv2d_s8 (all its MVE / DSP / C paths) over the whole output, with an add
 * stage (mt_kernel_add.h) in its output stage: each conv value is requantized to its int8
 * (conv_zp, clamped to [conv_min, conv_max]) exactly as conv2d stores it, then add's integer
 * rule takes it as a and skip's byte at the same position as b, and the result is stored at that
 * position of y. No intermediate int8 tensor is written or read, and no scratch is needed. y may
 * be skip's bytes (alias kind residual): every position is stored once, right after its skip
 * byte is read. x must not meet y (both program readers check it).
 */
#include "mt_kernel_add_stage.h"
#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* the conv part of the attributes is conv2d's, then add's: each stage reads its own slice */
#if MT_CONV2D_ADD_A_ZP != MT_CONV2D_N_ATTRS ||                                                     \
    MT_CONV2D_ADD_ACT_MAX + 1 != MT_CONV2D_N_ATTRS + MT_ADD_N_ATTRS
#error "conv2d_add attributes must be conv2d's followed by add's"
#endif /* attribute layout */

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI); bias, mult, shift:
// (Cout,) int32; skip: (N, Ho, Wo, Cout) int8  ->  y: (N, Ho, Wo, Cout) int8, may be skip
mt_status mt_conv2d_add_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_CONV2D_ADD_N_INPUTS, MT_CONV2D_ADD_N_OUTPUTS, MT_CONV2D_ADD_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *skip = &args->in[MT_CONV2D_ADD_IN_SKIP], *y = &args->out[MT_CONV2D_ADD_OUT_Y];
  const int32_t *add_at = args->attrs + MT_CONV2D_N_ATTRS;
  if (!mt_tensor_ok(skip, MT_DTYPE_INT8, 4) || !mt_tensor_ok(y, MT_DTYPE_INT8, 4) ||
      !mt_addsub_attrs_ok(add_at, 0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  for (int d = 0; d < 4; d++) {
    if (skip->shape[d] != y->shape[d]) {
      return MT_STATUS_BAD_ARGUMENT;
    }
  }
  mt_add_stage stage; /* conv2d's own checks (shapes, attributes) follow in mt_conv2d_stage_s8 */
  mt_add_stage_init(&stage, add_at, args->attrs[MT_CONV2D_ADD_CONV_ZP], (const int8_t *)skip->data,
                    (const int8_t *)y->data);
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
