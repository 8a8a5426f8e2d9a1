/*
 * mt_log_softmax_s8.c - integer log_softmax along the last axis (docs/numerics.md,
 * "log_softmax"); output qparams (s_out, out_zp) observed, folded into the tables.
 *
 * Per row: d = max - x in 0..255, sum = sum of exp_table[d] (the softmax's table, sum < 2^31),
 * k = floor(log2(sum)), j = the 8 bits after sum's leading one, then per element
 *     v = -(d * in_mult + (k - 16) * ln2 + log_table[j])       |v| < 2^31 in the domain
 *     y = clamp(((v + 2^15) >> 16) + out_zp, -128, 127)
 * Two passes to the sum, one for the output (y may be x: x[i] is read before y[i] is written).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define LOG_SOFTMAX_MAX_ROW  32767
#define LOG_SOFTMAX_EXP_ONE  65536
#define LOG_SOFTMAX_MAX_MULT (1 << 22)
#define LOG_SOFTMAX_MAX_LN2  (1 << 25)

/* Every entry of an int32[256] table in [lo, hi]. */
static int log_softmax_table_ok(const int32_t *table, int32_t lo, int32_t hi)
{
  for (int32_t i = 0; i < 256; i++) {
    if (table[i] < lo || table[i] > hi) {
      return 0;
    }
  }
  return 1;
}

/* ln(sum / 2^16) in Q16 output steps: (k - 16) * ln2 + log_table[j]; |result| < 2^30. */
static int32_t log_softmax_log(uint32_t sum, const int32_t *log_table, int32_t ln2)
{
  int32_t k = 0;
  while (k < 31 && (sum >> (k + 1)) != 0) {
    k++;
  }
  const uint32_t j = (k >= 8 ? sum >> (k - 8) : sum << (8 - k)) & 255u;
  return (k - 16) * ln2 + log_table[j];
}

// x: (..., L) int8 with 1 <= L <= 32767; exp_table, log_table: (256,) int32  ->  y: (..., L)
mt_status mt_log_softmax_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_LOG_SOFTMAX_N_INPUTS, MT_LOG_SOFTMAX_N_OUTPUTS,
                  MT_LOG_SOFTMAX_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_LOG_SOFTMAX_IN_X], *yt = &args->out[MT_LOG_SOFTMAX_OUT_Y];
  const mt_tensor *et = &args->in[MT_LOG_SOFTMAX_IN_EXP_TABLE];
  const mt_tensor *lt = &args->in[MT_LOG_SOFTMAX_IN_LOG_TABLE];
  const int32_t in_mult = args->attrs[MT_LOG_SOFTMAX_IN_MULT];
  const int32_t ln2 = args->attrs[MT_LOG_SOFTMAX_LN2], zp = args->attrs[MT_LOG_SOFTMAX_OUT_ZP];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || xt->rec->rank < 1 ||
      !mt_same_shape(xt, yt) || !mt_vec_ok(et, 256) || !mt_vec_ok(lt, 256) || in_mult < 0 ||
      in_mult > LOG_SOFTMAX_MAX_MULT || ln2 < 0 || ln2 > LOG_SOFTMAX_MAX_LN2 || !mt_zp_ok(zp)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint32_t len = xt->rec->shape[xt->rec->rank - 1];
  const int32_t *exp_table = (const int32_t *)et->data, *log_table = (const int32_t *)lt->data;
  if (len < 1 || len > LOG_SOFTMAX_MAX_ROW || exp_table[0] < 1 ||
      !log_softmax_table_ok(exp_table, 0, LOG_SOFTMAX_EXP_ONE) ||
      !log_softmax_table_ok(log_table, 0, ln2)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t rows = mt_numel(xt) / len;
  for (uint32_t r = 0; r < rows; r++, x += len, y += len) {
    int32_t max = x[0];
    for (uint32_t i = 1; i < len; i++) {
      max = x[i] > max ? x[i] : max;
    }
    uint32_t sum = 0; /* >= exp_table[0] >= 1 */
    for (uint32_t i = 0; i < len; i++) {
      sum += (uint32_t)exp_table[max - x[i]];
    }
    const int32_t lsum = log_softmax_log(sum, log_table, ln2);
    for (uint32_t i = 0; i < len; i++) {
      const int32_t v = -((max - x[i]) * in_mult) - lsum;
      const int32_t q = ((v + (1 << 15)) >> 16) + zp;
      y[i] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
    }
  }
  return MT_STATUS_OK;
}
