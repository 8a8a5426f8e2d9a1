/*
 * mt_depthwise_conv2d_s16.c - depthwise convolution on an int16 x (a16w8, docs/numerics.md
 * section 6): weights (KH, KW, C*M) int8, an int64 bias within int48, zero points 0, 16-bit
 * multipliers, int16 NHWC y. mt_depthwise_conv2d_s8 calls it for an int16 x.
 *
 *   acc[c*M + m] = bias + sum over the window's in-bounds taps of x[.., c] * w[ky, kx, c*M + m]
 *
 * Padding (zero point 0) contributes nothing and is skipped. Per output pixel, the taps of a
 * block of channels are summed in int32 lanes (|x * w| <= 2^22: DW16_TAPS = 256 taps fit), added
 * to the int64 accumulators every DW16_TAPS taps. MVE (M = 1, windows of at most DW16_TAPS
 * taps): four channels per int32 vector held across the window's taps (dw16_window_mve);
 * otherwise one channel at a time.
 */
#include "mt_mac16.h"

#define DW16_BLOCK 16 /* channels per block */
#define DW16_TAPS  256 /* taps summed in int32 before they are added to the int64 accumulator */

typedef struct {
  const int16_t *x;
  const int8_t *w;
  const int64_t *bias;
  const int32_t *mult, *shift;
  int16_t *y;
  mt_axis ah, aw;
  int32_t batch, c, m, kw, lo, hi;
} dw16_ctx;

static int dw16_init(dw16_ctx *c, const mt_op_args *a)
{
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_DEPTHWISE_CONV2D_IN_X], *w = &a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_DEPTHWISE_CONV2D_OUT_Y];
  const uint32_t *wd = w->rank == 4 && w->shape[0] == 1 ? &w->shape[1] : w->shape;
  const int32_t m = at[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  if (!mt_tensor_ok(x, MT_DTYPE_INT16, 4) || !mt_tensor_ok(y, MT_DTYPE_INT16, 4) ||
      !mt_tensor_ok(w, MT_DTYPE_INT8, w->rank) || (w->rank != 3 && wd == w->shape) || m < 1 ||
      mt_dim(wd[2]) < 0 || mt_dim(x->shape[0]) < 0 ||
      (uint64_t)x->shape[3] * (uint32_t)m != wd[2] || y->shape[0] != x->shape[0] ||
      y->shape[3] != wd[2] || at[MT_DEPTHWISE_CONV2D_IN_ZP] != 0 ||
      !mt_mac16_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_BIAS], &a->in[MT_DEPTHWISE_CONV2D_IN_MULT],
                   &a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT], wd[2], at[MT_DEPTHWISE_CONV2D_OUT_ZP],
                   at[MT_DEPTHWISE_CONV2D_ACT_MIN], at[MT_DEPTHWISE_CONV2D_ACT_MAX])) {
    return 0;
  }
  c->x = (const int16_t *)x->data;
  c->w = (const int8_t *)w->data;
  c->bias = (const int64_t *)a->in[MT_DEPTHWISE_CONV2D_IN_BIAS].data;
  c->mult = (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_MULT].data;
  c->shift = (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT].data;
  c->y = (int16_t *)y->data;
  c->batch = (int32_t)x->shape[0];
  c->c = (int32_t)x->shape[3];
  c->m = m;
  c->kw = mt_dim(wd[1]);
  c->lo = at[MT_DEPTHWISE_CONV2D_ACT_MIN];
  c->hi = at[MT_DEPTHWISE_CONV2D_ACT_MAX];
  return mt_axis_init(&c->ah, x->shape[1], mt_dim(wd[0]), at[MT_DEPTHWISE_CONV2D_STRIDE_H],
                      at[MT_DEPTHWISE_CONV2D_DILATION_H], at[MT_DEPTHWISE_CONV2D_PAD_TOP],
                      at[MT_DEPTHWISE_CONV2D_PAD_BOTTOM], y->shape[1]) &&
         mt_axis_init(&c->aw, x->shape[2], c->kw, at[MT_DEPTHWISE_CONV2D_STRIDE_W],
                      at[MT_DEPTHWISE_CONV2D_DILATION_W], at[MT_DEPTHWISE_CONV2D_PAD_LEFT],
                      at[MT_DEPTHWISE_CONV2D_PAD_RIGHT], y->shape[2]);
}

/* part[j] += x[tap, (o0 + j) / M] * w[tap, o0 + j] for j < nb (output channels o0..o0+nb). */
static void dw16_tap(const dw16_ctx *c, const int16_t *x_px, const int8_t *w_tap, int32_t o0,
                     int32_t nb, int32_t *part)
{
  for (int32_t j = 0; j < nb; j++) {
    part[j] += (int32_t)x_px[(o0 + j) / c->m] * w_tap[o0 + j];
  }
}

#if MT_MVE
/* M = 1, at most DW16_TAPS taps: part[j] = the window's sum for channels o0 + j, four channels
 * per int32 vector kept in a register across the taps (VLDRH.S32 / VLDRB.S32, VMUL, VADD). */
static void dw16_window_mve(const dw16_ctx *c, const int16_t *x_win, const int8_t *w_win,
                            int32_t rows, int32_t cols, int32_t o0, int32_t nb, int32_t *part)
{
  const size_t cout = (size_t)c->c, x_tap = (size_t)c->aw.dilation * cout;
  const size_t x_row = (size_t)c->ah.dilation * (size_t)c->aw.size * cout;
  const size_t w_row = (size_t)c->kw * cout;
  for (int32_t j = 0; j < nb; j += 4) {
    const mve_pred16_t p = vctp32q((uint32_t)(nb - j));
    int32x4_t s = vdupq_n_s32(0);
    for (int32_t ky = 0; ky < rows; ky++) {
      const int16_t *xr = x_win + (size_t)ky * x_row + (size_t)(o0 + j);
      const int8_t *wr = w_win + (size_t)ky * w_row + (size_t)(o0 + j);
      for (int32_t kx = 0; kx < cols; kx++, xr += x_tap, wr += cout) {
        s = vaddq_s32(s, vmulq_s32(vldrhq_z_s32(xr, p), vldrbq_z_s32(wr, p)));
      }
    }
    vstrwq_p_s32(part + j, s, p);
  }
}
#endif /* MT_MVE */

/* Output channels [o0, o0 + nb) of pixel (n, oh, ow). */
static int dw16_block(const dw16_ctx *c, int32_t n, int32_t oh, int32_t ow, int32_t o0, int32_t nb,
                      int16_t *y_px)
{
  int32_t ky0, ky1, kx0, kx1, taps = 0;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1);
  const size_t cout = (size_t)c->c * (size_t)c->m;
  int64_t acc[DW16_BLOCK];
  int32_t part[DW16_BLOCK] = {0};
  for (int32_t j = 0; j < nb; j++) {
    acc[j] = c->bias[o0 + j];
  }
#if MT_MVE
  if (c->m == 1 && (ky1 - ky0) * (kx1 - kx0) <= DW16_TAPS) {
    const size_t px = ((size_t)n * (size_t)c->ah.size + (size_t)(iy + ky0 * c->ah.dilation)) *
                          (size_t)c->aw.size +
                      (size_t)(ix + kx0 * c->aw.dilation);
    dw16_window_mve(c, c->x + px * (size_t)c->c,
                    c->w + ((size_t)ky0 * (size_t)c->kw + (size_t)kx0) * cout, ky1 - ky0, kx1 - kx0,
                    o0, nb, part);
    for (int32_t j = 0; j < nb; j++) {
      acc[j] += part[j];
    }
    ky1 = ky0; /* done: no tap left for the loop below */
  }
#endif /* MT_MVE */
  for (int32_t ky = ky0; ky < ky1; ky++) {
    for (int32_t kx = kx0; kx < kx1; kx++) {
      const size_t px = ((size_t)n * (size_t)c->ah.size + (size_t)(iy + ky * c->ah.dilation)) *
                            (size_t)c->aw.size +
                        (size_t)(ix + kx * c->aw.dilation);
      dw16_tap(c, c->x + px * (size_t)c->c, c->w + ((size_t)ky * (size_t)c->kw + (size_t)kx) * cout,
               o0, nb, part);
      if (++taps == DW16_TAPS || (ky == ky1 - 1 && kx == kx1 - 1)) {
        for (int32_t j = 0; j < nb; j++) {
          acc[j] += part[j];
          part[j] = 0;
        }
        taps = 0;
      }
    }
  }
  return mt_out16_n(acc, nb, c->mult + o0, c->shift + o0, c->lo, c->hi, y_px + o0);
}

// x: (N, H, W, C) int16; weight: (KH, KW, C*M) or (1, KH, KW, C*M) int8; bias: (C*M,) int64;
// mult, shift: (C*M,) int32  ->  y: (N, Ho, Wo, C*M) int16
mt_status mt_depthwise_conv2d_s16(const mt_op_args *args)
{
  dw16_ctx c;
  if (!dw16_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t cout = c.c * c.m;
  int16_t *y = c.y;
  for (int32_t n = 0; n < c.batch; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++) {
      for (int32_t ow = 0; ow < c.aw.out; ow++, y += cout) {
        for (int32_t o0 = 0; o0 < cout; o0 += DW16_BLOCK) {
          const int32_t nb = cout - o0 < DW16_BLOCK ? cout - o0 : DW16_BLOCK;
          if (!dw16_block(&c, n, oh, ow, o0, nb, y)) {
            return MT_STATUS_BAD_ARGUMENT; /* the loader bounds it: direct kernel calls */
          }
        }
      }
    }
  }
  return MT_STATUS_OK;
}
