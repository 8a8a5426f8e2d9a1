/*
 * mt_sub_s8.c - element-wise a - b with add's int32 sequence and SUB: RESCALE both inputs to
 * int32, SUB, RESCALE to int8, clamp:
 *   y = clamp(rq(rq(a - a_zp, a_mult, a_shift) - rq(b - b_zp, b_mult, b_shift)) + out_zp)
 * Numpy broadcasting (mt_bcast.h); y may be a or b (in place). As for add (mt_addsub.h), the
 * attributes alone decide whether every int32 intermediate fits for every int8 input pair; if not,
 * the kernel refuses the op before touching y. One path on every ISA level (64-bit rq per element;
 * MVE: four lanes of mt_rq_v on same-shape runs).
 */
#include "mt_addsub.h"
#include "mt_bcast.h"
#include "mt_binary16.h" /* int16 operands: mt_sub_s16 */

/* y[0..n) for one run of the broadcast walk: mt_addsub.h's general path, subtracting. */
static void sub_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                    const int32_t *at)
{
  mt_addsub_run(a, b, y, n, mode, at, 1);
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
mt_status mt_sub_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_SUB_N_INPUTS, MT_SUB_N_OUTPUTS, MT_SUB_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (args->in[MT_SUB_IN_A].rec->dtype == MT_DTYPE_INT16) {
    return mt_sub_s16 != NULL ? mt_sub_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[MT_SUB_IN_A], *bt = &args->in[MT_SUB_IN_B];
  const mt_tensor *yt = &args->out[MT_SUB_OUT_Y];
  mt_bcast bc;
  if (!mt_tensor_ok(at, MT_DTYPE_INT8, at->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      !mt_addsub_attrs_ok(args->attrs, 1)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                sub_run, args->attrs);
  return MT_STATUS_OK;
}
