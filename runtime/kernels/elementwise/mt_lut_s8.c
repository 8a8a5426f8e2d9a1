/*
 * mt_lut_s8.c - y = table[x + 128] with a 256-entry int8 table made at compile time (sigmoid,
 * tanh, hardswish, ...); y may be x (in place: each block is read before it is written).
 * MVE: 16 lookups per byte gather (VLDRB gather with the offsets x ^ 0x80 = x + 128 as u8),
 * tail-predicated. Cores with unaligned word access (and the host): four offsets per word read,
 * four lookups packed into one word write. Armv6-M: four byte lookups per step.
 * An int16 x (docs/numerics.md section 6) takes lut_run16: TOSA TABLE's interpolation in a
 * 513-entry int16 table of half-LSB entries, y = clamp((acc + 32) >> 6) to int16.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define MT_LUT16_SIZE 513u

// x: (...) int16; table: (513,) int16  ->  y: (...) int16, same shape (y may alias x)
static mt_status lut_run16(const mt_tensor *xt, const mt_tensor *tt, const mt_tensor *yt)
{
  if (!mt_tensor_ok(yt, MT_DTYPE_INT16, yt->rec->rank) || !mt_same_shape(xt, yt) ||
      !mt_tensor_ok(tt, MT_DTYPE_INT16, 1) || tt->rec->shape[0] != MT_LUT16_SIZE) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *table = (const int16_t *)tt->data;
  const int16_t *x = (const int16_t *)xt->data;
  int16_t *y = (int16_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t v = (uint32_t)((int32_t)x[i] + 32768);
    const int32_t base = table[v >> 7], top = table[(v >> 7) + 1];
    const int32_t acc = base * 128 + (top - base) * (int32_t)(v & 127u); /* |acc| < 2^24 */
    const int32_t r = (acc + 32) >> 6; /* compiled tables (|entry| <= 16383): |r| <= 32766 */
    y[i] = (int16_t)(r < -32768 ? -32768 : (r > 32767 ? 32767 : r));
  }
  return MT_STATUS_OK;
}

// x: (...) int8; table: (256,) int8  ->  y: (...) int8, same shape (y may alias x)
mt_status mt_lut_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_LUT_N_INPUTS, MT_LUT_N_OUTPUTS, MT_LUT_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_LUT_IN_X], *tt = &args->in[MT_LUT_IN_TABLE];
  const mt_tensor *yt = &args->out[MT_LUT_OUT_Y];
  if (xt->rec->dtype == MT_DTYPE_INT16 && mt_tensor_ok(xt, MT_DTYPE_INT16, xt->rec->rank)) {
    return lut_run16(xt, tt, yt);
  }
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_same_shape(xt, yt) ||
      !mt_tensor_ok(tt, MT_DTYPE_INT8, 1) || tt->rec->shape[0] != 256) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  uint32_t i = 0;
#if MT_MVE
  const int8_t *base = (const int8_t *)tt->data;
  for (; i < n; i += 16) {
    const mve_pred16_t p = vctp8q(n - i);
    const uint8x16_t at = veorq_u8(vldrbq_z_u8((const uint8_t *)x + i, p), vdupq_n_u8(0x80));
    vstrbq_p_s8(y + i, vldrbq_gather_offset_z_s8(base, at, p), p);
  }
#else /* !MT_MVE */
  const int8_t *table = (const int8_t *)tt->data + 128;
#if defined(__ARM_FEATURE_UNALIGNED) || !defined(__arm__)
  const uint8_t *at = (const uint8_t *)tt->data; /* at[x + 128] = at[(x ^ 0x80) as u8] */
  for (; i + 4 <= n; i += 4) { /* the word is read before y[i..i+4) is written */
    uint32_t w, r;
    __builtin_memcpy(&w, x + i, 4);
    w ^= 0x80808080u;
    r = (uint32_t)at[w & 0xFFu] | (uint32_t)at[(w >> 8) & 0xFFu] << 8 |
        (uint32_t)at[(w >> 16) & 0xFFu] << 16 | (uint32_t)at[w >> 24] << 24;
    __builtin_memcpy(y + i, &r, 4);
  }
#endif /* unaligned word access */
  for (; i + 4 <= n; i += 4) {
    const int8_t a = table[x[i]], b = table[x[i + 1]], c = table[x[i + 2]], d = table[x[i + 3]];
    y[i] = a;
    y[i + 1] = b;
    y[i + 2] = c;
    y[i + 3] = d;
  }
  for (; i < n; i++) {
    y[i] = table[x[i]];
  }
#endif /* MT_MVE */
  return MT_STATUS_OK;
}
