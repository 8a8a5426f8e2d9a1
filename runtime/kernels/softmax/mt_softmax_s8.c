/*
 * mt_softmax_s8.c - integer softmax along the last axis; output qparams fixed at (1/256, -128).
 *
 * Per row (docs/numerics.md, "softmax"): d = max - x in 0..255, e = exp_table[d] in [0, 65536],
 * sum = sum of e < 2^31 (rows of <= 32767), y = min((256 e + (sum >> 1)) / sum, 255) - 128 with
 * unsigned 32-bit division. Three passes over the row (max, sum, output); y may be x. MVE: the
 * max pass on 16 lanes, the sum pass on 4 (table gather); the output pass stays scalar (one
 * division per element).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

mt_status mt_softmax_s16(const mt_op_args *args) MT_WEAK16; /* int16 x: mt_softmax_s16.c */

#define SOFTMAX_MAX_ROW 32767
#define SOFTMAX_EXP_ONE 65536

/* table[0] >= 1 and every entry in [0, 65536], i.e. below 65537 as uint32 (a negative entry is
 * huge): the largest unsigned entry decides. MVE: 16 entries per step on four vectors. */
static int softmax_table_ok(const int32_t *table)
{
  uint32_t worst = 0;
#if MT_MVE /* reads the int32 table as uint32 */
  uint32x4_t w0 = vdupq_n_u32(0), w1 = w0, w2 = w0, w3 = w0;
  for (int32_t d = 0; d < 256; d += 16) {
    const uint32_t *t = (const uint32_t *)table + d;
    w0 = vmaxq_u32(w0, vldrwq_u32(t));
    w1 = vmaxq_u32(w1, vldrwq_u32(t + 4));
    w2 = vmaxq_u32(w2, vldrwq_u32(t + 8));
    w3 = vmaxq_u32(w3, vldrwq_u32(t + 12));
  }
  worst = vmaxvq_u32(0, vmaxq_u32(vmaxq_u32(w0, w1), vmaxq_u32(w2, w3)));
#else /* !MT_MVE */
  const uint32_t *t = (const uint32_t *)table;
  for (int32_t d = 0; d < 256; d += 4) { /* four entries per step */
    if (t[d] > SOFTMAX_EXP_ONE || t[d + 1] > SOFTMAX_EXP_ONE || t[d + 2] > SOFTMAX_EXP_ONE ||
        t[d + 3] > SOFTMAX_EXP_ONE) {
      return 0;
    }
  }
#endif /* MT_MVE */
  return table[0] >= 1 && worst <= SOFTMAX_EXP_ONE;
}

static void softmax_row(const int8_t *x, const int32_t *table, uint32_t len, int8_t *y)
{
  int32_t max = x[0];
  uint32_t sum = 0, i = 0; /* sum >= table[0] >= 1: the max element has d = 0 */
#if MT_MVE
  for (; i < len; i += 16) { /* max: 16 lanes per step */
    const mve_pred16_t p = vctp8q(len - i);
    max = vmaxvq_p_s8((int8_t)max, vldrbq_z_s8(x + i, p), p);
  }
  const int32x4_t vmax = vdupq_n_s32(max);
  for (i = 0; i < len; i += 4) { /* sum: d = max - x on four lanes, a gather from the table */
    const mve_pred16_t p = vctp32q(len - i);
    const uint32x4_t d = vreinterpretq_u32_s32(vsubq_s32(vmax, vldrbq_z_s32(x + i, p)));
    sum = vaddvaq_p_u32(sum, vldrwq_gather_shifted_offset_z_u32((const uint32_t *)table, d, p), p);
  }
#else /* !MT_MVE */
  for (i = 1; i < len; i++) {
    max = x[i] > max ? x[i] : max;
  }
  for (i = 0; i < len; i++) {
    sum += (uint32_t)table[max - x[i]];
  }
#endif /* MT_MVE */
  const uint32_t half = sum >> 1;
  for (i = 0; i < len; i++) { /* reads x[i] before writing y[i]: in place is fine */
    const uint32_t q = ((uint32_t)table[max - x[i]] * 256u + half) / sum;
    y[i] = (int8_t)((int32_t)(q < 255u ? q : 255u) - 128);
  }
}

// x: (..., L) int8 with 1 <= L <= 32767; exp_table: (256,) int32  ->  y: (..., L) int8
mt_status mt_softmax_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_SOFTMAX_N_INPUTS, MT_SOFTMAX_N_OUTPUTS, MT_SOFTMAX_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_SOFTMAX_IN_X], *yt = &args->out[MT_SOFTMAX_OUT_Y];
  const mt_tensor *tt = &args->in[MT_SOFTMAX_IN_EXP_TABLE];
  if (xt->rec->dtype == MT_DTYPE_INT16) {
    return mt_softmax_s16 != NULL ? mt_softmax_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || xt->rec->rank < 1 ||
      !mt_same_shape(xt, yt) || !mt_vec_ok(tt, 256)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint32_t len = xt->rec->shape[xt->rec->rank - 1];
  const int32_t *table = (const int32_t *)tt->data;
  if (len < 1 || len > SOFTMAX_MAX_ROW || !softmax_table_ok(table)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t rows = mt_numel(xt) / len;
  for (uint32_t r = 0; r < rows; r++) {
    softmax_row(x + (size_t)r * len, table, len, y + (size_t)r * len);
  }
  return MT_STATUS_OK;
}
