/*
 * mt_max_pool2d_s8.c - max over each window's in-bounds elements (padding never wins), then the
 * activation clamp. The output pixel itself holds the running maximum, so the channel loop is
 * innermost and contiguous; no scratch.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* mt_pool_axes reads the window attributes from attrs[0..7] */
#define MAX_ATTR_ORDER_OK                                                                          \
  (MT_MAX_POOL2D_KERNEL_H == 0 && MT_MAX_POOL2D_KERNEL_W == 1 && MT_MAX_POOL2D_STRIDE_H == 2 &&    \
   MT_MAX_POOL2D_PAD_TOP == 4 && MT_MAX_POOL2D_PAD_RIGHT == 7)
typedef char mt_max_pool_attr_order[MAX_ATTR_ORDER_OK ? 1 : -1];

/* y_px[c] = max over the window of x[.., c] (C channels). */
static void max_pixel(const mt_axis *ah, const mt_axis *aw, const int8_t *x_img, int32_t oh,
                      int32_t ow, size_t c, int8_t *y_px)
{
  int32_t ky0, ky1, kx0, kx1;
  const int32_t iy = mt_axis_taps(ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(aw, ow, &kx0, &kx1);
  const int8_t *first = x_img + ((size_t)(iy + ky0) * aw->size + (size_t)(ix + kx0)) * c;
  memcpy(y_px, first, c); /* every window has an element: checked at entry */
  for (int32_t ky = ky0; ky < ky1; ky++) {
    for (int32_t kx = kx0; kx < kx1; kx++) {
      const int8_t *xp = x_img + ((size_t)(iy + ky) * aw->size + (size_t)(ix + kx)) * c;
      for (size_t ch = 0; ch < c; ch++) {
        if (xp[ch] > y_px[ch]) {
          y_px[ch] = xp[ch];
        }
      }
    }
  }
}

/* One channel (a 1-D pool lifted as [N, C, L, 1], a gathered window axis): output row oh of
 * one image, the row's taps found once; a scalar running maximum per output, over the window's
 * in-bounds columns [kx0, kx1) (all kernel_w of them away from the edges). */
static void max_row_c1(const mt_axis *ah, const mt_axis *aw, const int8_t *x_img, int32_t oh,
                       int32_t lo, int32_t hi, int8_t *y_row)
{
  int32_t ky0, ky1, kx0 = 0, kx1 = aw->kernel;
  const int32_t iy = mt_axis_taps(ah, oh, &ky0, &ky1), w = aw->size;
  const int8_t *row = x_img + (size_t)(iy + ky0) * (size_t)w;
  for (int32_t ow = 0, ix = -aw->pad0; ow < aw->out; ow++, ix += aw->stride) {
    if (ix < 0 || ix > w - aw->kernel) {
      (void)mt_axis_taps(aw, ow, &kx0, &kx1);
    } else {
      kx0 = 0;
      kx1 = aw->kernel;
    }
    const int8_t *xp = row + (ix + kx0); /* ix + kx0 >= 0: an in-bounds column */
    const int32_t taps = kx1 - kx0;
    int32_t best = -128; /* every window has an element: checked at entry */
    for (int32_t ky = ky0; ky < ky1; ky++, xp += w) {
      for (int32_t kx = 0; kx < taps; kx++) {
        best = xp[kx] > best ? xp[kx] : best;
      }
    }
    y_row[ow] = (int8_t)(best < lo ? lo : (best > hi ? hi : best));
  }
}

// x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
mt_status mt_max_pool2d_s8(const mt_op_args *args)
{
  mt_axis ah, aw;
  if (!mt_args_ok(args, MT_MAX_POOL2D_N_INPUTS, MT_MAX_POOL2D_N_OUTPUTS, MT_MAX_POOL2D_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_MAX_POOL2D_IN_X], *yt = &args->out[MT_MAX_POOL2D_OUT_Y];
  const int32_t lo = args->attrs[MT_MAX_POOL2D_ACT_MIN], hi = args->attrs[MT_MAX_POOL2D_ACT_MAX];
  if (!mt_pool_axes(&ah, &aw, xt, yt, args->attrs) || !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t c = xt->shape[3], x_img = (size_t)ah.size * (size_t)aw.size * c;
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  for (uint32_t n = 0; n < xt->shape[0]; n++) {
    for (int32_t oh = 0; oh < ah.out && c == 1; oh++, y += aw.out) {
      max_row_c1(&ah, &aw, x + n * x_img, oh, lo, hi, y);
    }
    for (int32_t oh = 0; oh < ah.out && c != 1; oh++) {
      for (int32_t ow = 0; ow < aw.out; ow++, y += c) {
        max_pixel(&ah, &aw, x + n * x_img, oh, ow, c, y);
        for (size_t ch = 0; ch < c; ch++) {
          y[ch] = (int8_t)(y[ch] < lo ? lo : (y[ch] > hi ? hi : y[ch]));
        }
      }
    }
  }
  return MT_STATUS_OK;
}
