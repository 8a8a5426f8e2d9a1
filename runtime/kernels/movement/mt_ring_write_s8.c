/*
 * mt_ring_write_s8.c - one frame into a ring window's block (format 1.6; docs/numerics.md,
 * ring_write). The block (y's data when the interpreter calls this kernel) is
 *
 *   +----------+------------+--------+--------+-----+--------------+
 *   | int32 p  | 12 unused  | slot 0 | slot 1 | ... | slot 2n - 2  |   slots of s = |x| bytes
 *   +----------+------------+--------+--------+-----+--------------+
 *
 * p = (p + 1) % n; x goes to slot p + n - 1 and, when p >= 1, to its mirror slot p - 1, so the
 * window the readers see, slots p .. p + n - 1, is the last n frames in order and contiguous:
 * 2 frames written per call, none shifted.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

// x: one frame (s bytes) int8 or int16; y: ring window of `slots` frames (n * s bytes), its data
// the block [16 + (2n - 1) * s bytes]
mt_status mt_ring_write_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_RING_WRITE_N_INPUTS, MT_RING_WRITE_N_OUTPUTS, MT_RING_WRITE_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_RING_WRITE_IN_X], *yt = &args->out[MT_RING_WRITE_OUT_Y];
  const int32_t n = args->attrs[MT_RING_WRITE_SLOTS];
  const uint8_t dt = xt->rec->dtype;
  if ((dt != MT_DTYPE_INT8 && dt != MT_DTYPE_INT16) || !mt_tensor_ok(xt, dt, xt->rec->rank) ||
      !mt_tensor_ok(yt, dt, yt->rec->rank) || n < 2 ||
      (uint64_t)xt->rec->size * (uint32_t)n != yt->rec->size) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  uint8_t *block = (uint8_t *)yt->data, *slots = block + MT_RING_HEAD;
  const uint32_t s = xt->rec->size;
  int32_t p;
  memcpy(&p, block, sizeof p);
  if (p < 0 || p >= n) { /* a corrupt position (the persistent state): nothing is written */
    return MT_STATUS_BAD_STATE;
  }
  p = p + 1 == n ? 0 : p + 1;
  memcpy(slots + (uint32_t)(p + n - 1) * s, xt->data, s);
  if (p >= 1) {
    memcpy(slots + (uint32_t)(p - 1) * s, xt->data, s);
  }
  memcpy(block, &p, sizeof p);
  return MT_STATUS_OK;
}
