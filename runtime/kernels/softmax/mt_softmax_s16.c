/*
 * mt_softmax_s16.c - integer softmax of an int16 x along the last axis (a16w8,
 * docs/numerics.md section 6); output qparams fixed at (1/32768, 0). mt_softmax_s8 calls it for
 * an int16 x (a weak reference: linked only when a program has an int16 softmax).
 *
 * Per row: d = max - x in 0..65535, split d = 256 hi + lo; with the 512-entry Q30 table
 * (exp(-s lo) in [0, 256), exp(-s 256 hi) in [256, 512)):
 *   e   = (table[256 + hi] * table[lo] + 2^29) >> 30      <= 2^30, uint64
 *   sum = sum of e                                       < 2^45 (rows of <= 32767)
 *   y   = min((2^15 e + (sum >> 1)) / sum, 32767)         unsigned 64-bit division
 * Three passes over the row (max, sum, output); y may be x (x[i] is read before y[i] is
 * written). MVE: the max pass on eight lanes; the table products and the divisions are scalar.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define SOFTMAX16_MAX_ROW 32767
#define SOFTMAX16_ONE     (1u << 30) /* the tables' 1.0 (Q30) */

mt_status mt_softmax_s16(const mt_op_args *args) MT_WEAK16;

/* Every entry in [0, 2^30] (as uint32: a negative entry is huge) and e(0) >= 1. */
static int softmax16_table_ok(const uint32_t *t)
{
  for (int32_t j = 0; j < 512; j++) {
    if (t[j] > SOFTMAX16_ONE) {
      return 0;
    }
  }
  return (((uint64_t)t[256] * t[0] + (1u << 29)) >> 30) >= 1u;
}

/* e(d) of the definition: two table entries, one 32 x 32 -> 64-bit product. */
static inline uint64_t softmax16_exp(const uint32_t *t, uint32_t d)
{
  return ((uint64_t)t[256 + (d >> 8)] * t[d & 255u] + (1u << 29)) >> 30;
}

static void softmax16_row(const int16_t *x, const uint32_t *t, uint32_t len, int16_t *y)
{
  int32_t max = x[0];
  uint32_t i = 0;
#if MT_MVE
  for (; i < len; i += 8) { /* max: eight lanes per step */
    const mve_pred16_t p = vctp16q(len - i);
    max = vmaxvq_p_s16((int16_t)max, vldrhq_z_s16(x + i, p), p);
  }
#else /* !MT_MVE */
  for (i = 1; i < len; i++) {
    max = x[i] > max ? x[i] : max;
  }
#endif /* MT_MVE */
  uint64_t sum = 0; /* >= e(0) >= 1: the max element has d = 0 */
  for (i = 0; i < len; i++) {
    sum += softmax16_exp(t, (uint32_t)(max - x[i]));
  }
  const uint64_t half = sum >> 1;
  for (i = 0; i < len; i++) { /* reads x[i] before writing y[i]: in place is fine */
    const uint64_t q = ((softmax16_exp(t, (uint32_t)(max - x[i])) << 15) + half) / sum;
    y[i] = (int16_t)(q < 32767u ? q : 32767u);
  }
}

// x: (..., L) int16 with 1 <= L <= 32767; exp_table: (512,) int32  ->  y: (..., L) int16
mt_status mt_softmax_s16(const mt_op_args *args)
{
  const mt_tensor *xt = &args->in[MT_SOFTMAX_IN_X], *yt = &args->out[MT_SOFTMAX_OUT_Y];
  const mt_tensor *tt = &args->in[MT_SOFTMAX_IN_EXP_TABLE];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT16, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT16, yt->rec->rank) || xt->rec->rank < 1 ||
      !mt_same_shape(xt, yt) || !mt_vec_ok(tt, 512)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint32_t len = xt->rec->shape[xt->rec->rank - 1];
  const uint32_t *table = (const uint32_t *)tt->data;
  if (len < 1 || len > SOFTMAX16_MAX_ROW || !softmax16_table_ok(table)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *x = (const int16_t *)xt->data;
  int16_t *y = (int16_t *)yt->data;
  const uint32_t rows = mt_numel(xt) / len;
  for (uint32_t r = 0; r < rows; r++) {
    softmax16_row(x + (size_t)r * len, table, len, y + (size_t)r * len);
  }
  return MT_STATUS_OK;
}
