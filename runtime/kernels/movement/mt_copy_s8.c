/*
 * mt_copy_s8.c - byte copy of an int8 or int16 tensor into one of the same dtype and element count
 * (a reshape that cannot alias). memmove: a planner that overlaps the two is still served
 * correctly.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

// x: (...) int8 or int16  ->  y: (...) the same dtype, as many elements
mt_status mt_copy_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_COPY_N_INPUTS, MT_COPY_N_OUTPUTS, MT_COPY_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_COPY_IN_X], *yt = &args->out[MT_COPY_OUT_Y];
  const uint8_t dt = xt->rec->dtype;
  if ((dt != MT_DTYPE_INT8 && dt != MT_DTYPE_INT16) || !mt_tensor_ok(xt, dt, xt->rec->rank) ||
      !mt_tensor_ok(yt, dt, yt->rec->rank) || mt_numel(xt) != mt_numel(yt)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (xt->data != yt->data) {
    memmove(yt->data, xt->data, (size_t)mt_numel(xt) * (dt == MT_DTYPE_INT16 ? 2u : 1u));
  }
  return MT_STATUS_OK;
}
