/*
 * mt_pool_s16.c - max_pool2d and avg_pool2d on int16 NHWC (a16w8, docs/numerics.md section 6):
 * the int8 definitions with zero points 0 and an int16 clamp range within [-32767, 32767].
 *
 *   max  y = clamp(max of the window's in-bounds elements, act_min, act_max)
 *   avg  acc = sum of the in-bounds elements (int32: at most AVG16_WINDOW of them, |x| <= 2^15),
 *        y = clamp(rq(acc, reciprocal_scale(count))), count = divisor if > 0, else KH * KW if
 *        count_include_pad, else the number of in-bounds elements
 *
 * Plain C, one channel at a time inside each window (the attributes' attribute order is both
 * pools' first eight: kernel, stride, pads).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"
#include "mt_pool16.h"

#define POOL16_MAX   32767
#define AVG16_WINDOW 65538 /* |sum| <= 32768 * 65538 < 2^31 */
#define AVG16_COUNT  (1 << 30) /* larger counts need a multiplier >= 2^31 */

/* x, y int16 NHWC with y's (Ho, Wo) from the attributes and no window all padding. */
static int pool16_axes(mt_axis *ah, mt_axis *aw, const mt_op_args *a, int32_t lo, int32_t hi)
{
  const mt_tensor *x = &a->in[0], *y = &a->out[0];
  const int32_t *k = a->attrs;
  return mt_tensor_ok(x, MT_DTYPE_INT16, 4) && mt_tensor_ok(y, MT_DTYPE_INT16, 4) &&
         x->rec->shape[0] == y->rec->shape[0] && x->rec->shape[3] == y->rec->shape[3] &&
         mt_dim(x->rec->shape[0]) >= 0 && mt_dim(x->rec->shape[3]) >= 0 &&
         mt_axis_init(ah, x->rec->shape[1], k[0], k[2], 1, k[4], k[6], y->rec->shape[1]) &&
         mt_axis_init(aw, x->rec->shape[2], k[1], k[3], 1, k[5], k[7], y->rec->shape[2]) &&
         mt_axis_windows_nonempty(ah) && mt_axis_windows_nonempty(aw) && -POOL16_MAX <= lo &&
         lo <= hi && hi <= POOL16_MAX;
}

/* Every output pixel of one pool: avg = 0 (max) or 1 (avg, with its fixed count or 0). */
static void pool16_run(const mt_op_args *a, const mt_axis *ah, const mt_axis *aw, int avg,
                       int32_t fixed, int32_t lo, int32_t hi)
{
  const mt_tensor *xt = &a->in[0];
  const size_t ch = xt->rec->shape[3];
  const int16_t *x = (const int16_t *)xt->data;
  int16_t *y = (int16_t *)a->out[0].data;
  int32_t mult = 0, shift = 2, last = 0;
  for (uint32_t n = 0; n < xt->rec->shape[0]; n++) {
    for (int32_t oh = 0; oh < ah->out; oh++) {
      for (int32_t ow = 0; ow < aw->out; ow++, y += ch) {
        int32_t ky0, ky1, kx0, kx1;
        const int32_t iy = mt_axis_taps(ah, oh, &ky0, &ky1), ix = mt_axis_taps(aw, ow, &kx0, &kx1);
        const int32_t count = fixed ? fixed : (ky1 - ky0) * (kx1 - kx0);
        if (avg && count != last) {
          mt_reciprocal_scale(count, &mult, &shift);
          last = count;
        }
        for (size_t c = 0; c < ch; c++) {
          int32_t acc = avg ? 0 : -POOL16_MAX - 1;
          for (int32_t ky = ky0; ky < ky1; ky++) {
            const size_t row =
                ((size_t)n * (size_t)ah->size + (size_t)(iy + ky)) * (size_t)aw->size;
            for (int32_t kx = kx0; kx < kx1; kx++) {
              const int32_t v = x[(row + (size_t)(ix + kx)) * ch + c];
              acc = avg ? acc + v : (v > acc ? v : acc);
            }
          }
          const int64_t r = avg ? mt_rq(acc, mult, shift) : acc;
          y[c] = (int16_t)(r < lo ? lo : (r > hi ? hi : r));
        }
      }
    }
  }
}

// x: (N, H, W, C) int16  ->  y: (N, Ho, Wo, C) int16
mt_status mt_max_pool2d_s16(const mt_op_args *args)
{
  mt_axis ah, aw;
  const int32_t lo = args->attrs[MT_MAX_POOL2D_ACT_MIN], hi = args->attrs[MT_MAX_POOL2D_ACT_MAX];
  if (!pool16_axes(&ah, &aw, args, lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  pool16_run(args, &ah, &aw, 0, 0, lo, hi);
  return MT_STATUS_OK;
}

// x: (N, H, W, C) int16  ->  y: (N, Ho, Wo, C) int16
mt_status mt_avg_pool2d_s16(const mt_op_args *args)
{
  mt_axis ah, aw;
  const int32_t *at = args->attrs;
  const int32_t lo = at[MT_AVG_POOL2D_ACT_MIN], hi = at[MT_AVG_POOL2D_ACT_MAX];
  const int32_t cip = at[MT_AVG_POOL2D_COUNT_INCLUDE_PAD], divisor = at[MT_AVG_POOL2D_DIVISOR];
  const int64_t full = (int64_t)at[MT_AVG_POOL2D_KERNEL_H] * at[MT_AVG_POOL2D_KERNEL_W];
  if (!pool16_axes(&ah, &aw, args, lo, hi) || (cip != 0 && cip != 1) || divisor < 0 ||
      divisor > AVG16_COUNT || at[MT_AVG_POOL2D_IN_ZP] != 0 || at[MT_AVG_POOL2D_OUT_ZP] != 0 ||
      (divisor == 0 && cip && full > AVG16_COUNT) ||
      (int64_t)(ah.kernel < ah.size ? ah.kernel : ah.size) *
              (aw.kernel < aw.size ? aw.kernel : aw.size) >
          AVG16_WINDOW) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  pool16_run(args, &ah, &aw, 1, divisor > 0 ? divisor : (cip ? (int32_t)full : 0), lo, hi);
  return MT_STATUS_OK;
}
