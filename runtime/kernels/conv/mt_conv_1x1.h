/*
 * mt_conv_1x1.h - the 1x1 convolution fast path of mt_conv2d_s8 (groups == 1, every window
 * inside the input): a matrix product of the input pixels (rows of Cin bytes, taken every
 * stride) with the weight rows (Cout x Cin), per-channel requantization.
 *
 * conv1x1_run returns 1 when it computed y, 0 when the shape is left to the general path.
 * The MVE variant lives in mt_conv_1x1_mve.h (its algorithm differs wholesale).
 */
#ifndef MT_CONV_1X1_H
#define MT_CONV_1X1_H

#include "mt_kernel_util.h"

typedef struct {
  const int8_t *x, *w; /* x: (N, H, W, Cin); w: (Cout, Cin) */
  const int32_t *bias, *mult, *shift;
  int8_t *y; /* (N, Ho, Wo, Cout) */
  int32_t batch, h, w_in, cin, cout, ho, wo, stride_h, stride_w;
  int32_t x_off, out_zp, act_min, act_max;
} mt_conv1x1;

#if MT_MVE
#include "mt_conv_1x1_mve.h" /* conv1x1_mve */
#endif /* MT_MVE */

static int conv1x1_run(const mt_conv1x1 *p)
{
#if MT_MVE
  return conv1x1_mve(p);
#else
  (void)p;
  return 0;
#endif /* MT_MVE */
}

#endif /* MT_CONV_1X1_H */
