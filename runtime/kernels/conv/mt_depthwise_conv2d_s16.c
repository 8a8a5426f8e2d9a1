/*
 * mt_depthwise_conv2d_s16.c - depthwise convolution on an int16 x (a16w8, docs/numerics.md
 * section 6): weights (KH, KW, C*M) int8, an int64 bias within int48, zero points 0, 16-bit
 * multipliers, int16 NHWC y. mt_depthwise_conv2d_s8 calls it for an int16 x.
 *
 *   acc[c*M + m] = bias + sum over the window's in-bounds taps of x[.., c] * w[ky, kx, c*M + m]
 *
 * Padding (zero point 0) contributes nothing and is skipped: per output pixel the in-bounds
 * taps form a rows x cols window. In the 32-bit form (mt_stage16: every |bias| + 32768 * 128 *
 * taps within int32, every shift in [17, 46]) each channel's sum starts at its bias in int32 and
 * the output stage is mt_rq16_32's: MVE (M = 1) eight channels per pass, VLDRH.S16 / VLDRB.S16
 * then VMULLB / VMULLT into even / odd int32 lanes (bias and multipliers gathered, y scattered in
 * that order); DSP (M = 1) four channels per pass, SMLABB / SMLATB / SMLABT / SMLATT on halfword
 * pairs; C one channel at a time. Otherwise the 64-bit form: per block of DW16_BLOCK channels the
 * taps are summed in int32 (|x * w| <= 2^22: DW16_TAPS = 256 taps fit), added to int64
 * accumulators every DW16_TAPS taps.
 */
#include "mt_mac16.h"

#define DW16_BLOCK 16 /* channels per block */
#define DW16_TAPS  256 /* taps summed in int32 before they are added to the int64 accumulator */

typedef struct {
  const int16_t *x;
  const int8_t *w;
  int16_t *y;
  mt_stage16 st;
  mt_axis ah, aw;
  int32_t batch, c, m, kw;
} dw16_ctx;

static int dw16_init(dw16_ctx *c, const mt_op_args *a)
{
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_DEPTHWISE_CONV2D_IN_X], *w = &a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_DEPTHWISE_CONV2D_OUT_Y];
  const uint32_t *wd =
      w->rec->rank == 4 && w->rec->shape[0] == 1 ? &w->rec->shape[1] : w->rec->shape;
  const int32_t m = at[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  if (!mt_tensor_ok(x, MT_DTYPE_INT16, 4) || !mt_tensor_ok(y, MT_DTYPE_INT16, 4) ||
      !mt_tensor_ok(w, MT_DTYPE_INT8, w->rec->rank) || (w->rec->rank != 3 && wd == w->rec->shape) ||
      m < 1 || mt_dim(wd[2]) < 0 || mt_dim(x->rec->shape[0]) < 0 ||
      (uint64_t)x->rec->shape[3] * (uint32_t)m != wd[2] || y->rec->shape[0] != x->rec->shape[0] ||
      y->rec->shape[3] != wd[2] || at[MT_DEPTHWISE_CONV2D_IN_ZP] != 0 ||
      !mt_mac16_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_BIAS], &a->in[MT_DEPTHWISE_CONV2D_IN_MULT],
                   &a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT], wd[2], at[MT_DEPTHWISE_CONV2D_OUT_ZP],
                   at[MT_DEPTHWISE_CONV2D_ACT_MIN], at[MT_DEPTHWISE_CONV2D_ACT_MAX])) {
    return 0;
  }
  c->x = (const int16_t *)x->data;
  c->w = (const int8_t *)w->data;
  c->y = (int16_t *)y->data;
  c->batch = (int32_t)x->rec->shape[0];
  c->c = (int32_t)x->rec->shape[3];
  c->m = m;
  c->kw = mt_dim(wd[1]);
  mt_stage16_init(&c->st, (const int64_t *)a->in[MT_DEPTHWISE_CONV2D_IN_BIAS].data,
                  (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_MULT].data,
                  (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT].data,
                  at[MT_DEPTHWISE_CONV2D_ACT_MIN], at[MT_DEPTHWISE_CONV2D_ACT_MAX], NULL, 0, wd[2],
                  wd[0] * wd[1], 0);
  return mt_axis_init(&c->ah, x->rec->shape[1], mt_dim(wd[0]), at[MT_DEPTHWISE_CONV2D_STRIDE_H],
                      at[MT_DEPTHWISE_CONV2D_DILATION_H], at[MT_DEPTHWISE_CONV2D_PAD_TOP],
                      at[MT_DEPTHWISE_CONV2D_PAD_BOTTOM], y->rec->shape[1]) &&
         mt_axis_init(&c->aw, x->rec->shape[2], c->kw, at[MT_DEPTHWISE_CONV2D_STRIDE_W],
                      at[MT_DEPTHWISE_CONV2D_DILATION_W], at[MT_DEPTHWISE_CONV2D_PAD_LEFT],
                      at[MT_DEPTHWISE_CONV2D_PAD_RIGHT], y->rec->shape[2]);
}

/* part[j] += x[tap, (o0 + j) / M] * w[tap, o0 + j] for j < nb (output channels o0..o0+nb). */
static void dw16_tap(const dw16_ctx *c, const int16_t *x_px, const int8_t *w_tap, int32_t o0,
                     int32_t nb, int32_t *part)
{
  for (int32_t j = 0; j < nb; j++) {
    part[j] += (int32_t)x_px[(o0 + j) / c->m] * w_tap[o0 + j];
  }
}

/* One pixel's window in the 32-bit form: x_win, w_win at its first in-bounds tap, rows x cols
 * taps (x steps x_tap per column, x_row per row; w steps cout and w_row). */
typedef struct {
  const int16_t *x;
  const int8_t *w;
  int32_t rows, cols;
  size_t x_tap, x_row, w_row;
} dw16_win;

#if MT_MVE
/* M = 1: channels [j, j + 8) per pass, even and odd channels in two int32 vectors. */
static MT_NOINLINE void dw16_fast_mve(const dw16_ctx *c, const dw16_win *k, int16_t *y)
{
  const mt_stage16 *st = &c->st;
  const uint32x4_t even = vmulq_n_u32(vidupq_n_u32(0, 1), 2); /* 0, 2, 4, 6 */
  const int32x4_t lo = vdupq_n_s32(st->lo), hi = vdupq_n_s32(st->hi);
  for (int32_t j = 0; j < c->c; j += 8) {
    const uint32_t left = (uint32_t)(c->c - j);
    const mve_pred16_t p = vctp16q(left), pe = vctp32q((left + 1) / 2), po = vctp32q(left / 2);
    const int32_t *b = (const int32_t *)(const void *)(st->bias + j); /* low words: int32 */
    int32x4_t se = vldrwq_gather_shifted_offset_z_s32(b, vmulq_n_u32(even, 2), pe);
    int32x4_t so = vldrwq_gather_shifted_offset_z_s32(b + 2, vmulq_n_u32(even, 2), po);
    for (int32_t r = 0; r < k->rows; r++) {
      const int16_t *xr = k->x + (size_t)r * k->x_row + j;
      const int8_t *wr = k->w + (size_t)r * k->w_row + j;
      for (int32_t t = 0; t < k->cols; t++, xr += k->x_tap, wr += c->c) {
        const int16x8_t xv = vldrhq_z_s16(xr, p), wv = vldrbq_z_s16(wr, p);
        se = vaddq_s32(se, vmullbq_int_s16(xv, wv));
        so = vaddq_s32(so, vmulltq_int_s16(xv, wv));
      }
    }
    for (int32_t odd = 0; odd < 2; odd++) {
      const mve_pred16_t q = odd ? po : pe;
      const int32x4_t m =
          vshlq_n_s32(vldrwq_gather_shifted_offset_z_s32(st->mult + j + odd, even, q), 16);
      const int32x4_t sh = vldrwq_gather_shifted_offset_z_s32(st->shift + j + odd, even, q);
      const int32x4_t v = vrshlq_s32(vmulhq_s32(odd ? so : se, m), vsubq_s32(vdupq_n_s32(16), sh));
      vstrhq_scatter_shifted_offset_p_s32(y + j + odd, even, vminq_s32(vmaxq_s32(v, lo), hi), q);
    }
  }
}
#endif /* MT_MVE */

#if MT_DSP && !MT_MVE
/* M = 1: channels [j, j + 4) per pass, x as halfword pairs, the weights by SXTB16. */
static MT_NOINLINE int32_t dw16_fast_dsp(const dw16_ctx *c, const dw16_win *k, int16_t *y)
{
  const mt_stage16 *st = &c->st;
  int32_t j = 0;
  for (; j + 4 <= c->c; j += 4) {
    int32_t a0 = (int32_t)st->bias[j], a1 = (int32_t)st->bias[j + 1];
    int32_t a2 = (int32_t)st->bias[j + 2], a3 = (int32_t)st->bias[j + 3];
    for (int32_t r = 0; r < k->rows; r++) {
      const int16_t *xr = k->x + (size_t)r * k->x_row + j;
      const int8_t *wr = k->w + (size_t)r * k->w_row + j;
      for (int32_t t = 0; t < k->cols; t++, xr += k->x_tap, wr += c->c) {
        int32_t x01, x23;
        __builtin_memcpy(&x01, xr, 4);
        __builtin_memcpy(&x23, xr + 2, 4);
        const uint32_t wv = mt_read_s8x4(wr);
        const int32_t w02 = __sxtb16((int32_t)wv), w13 = mt_sxtb16_ror8(wv);
        a0 = __smlabb(x01, w02, a0);
        a1 = __smlatb(x01, w13, a1);
        a2 = __smlabt(x23, w02, a2);
        a3 = __smlatt(x23, w13, a3);
      }
    }
    const int32_t acc[4] = {a0, a1, a2, a3};
    mt_out16_32_n(st, acc, j, 4, y);
  }
  return j; /* the channels left go through dw16_fast_c */
}
#endif /* MT_DSP && !MT_MVE */

/* Channels [j0, C * M) one at a time, int32 sums from the bias. */
static void dw16_fast_c(const dw16_ctx *c, const dw16_win *k, int32_t j0, int16_t *y)
{
  const int32_t cout = c->c * c->m;
  for (int32_t j = j0; j < cout; j++) {
    int32_t acc = (int32_t)c->st.bias[j];
    for (int32_t r = 0; r < k->rows; r++) {
      const int16_t *xr = k->x + (size_t)r * k->x_row + j / c->m;
      const int8_t *wr = k->w + (size_t)r * k->w_row + j;
      for (int32_t t = 0; t < k->cols; t++, xr += k->x_tap, wr += cout) {
        acc += (int32_t)*xr * *wr;
      }
    }
    mt_out16_32_n(&c->st, &acc, j, 1, y);
  }
}

/* Every channel of pixel (n, oh, ow) in the 32-bit form. */
static void dw16_fast(const dw16_ctx *c, int32_t n, int32_t oh, int32_t ow, int16_t *y_px)
{
  int32_t ky0, ky1, kx0, kx1, j = 0;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1);
  const size_t cout = (size_t)c->c * (size_t)c->m;
  const size_t px =
      ((size_t)n * (size_t)c->ah.size + (size_t)(iy + ky0 * c->ah.dilation)) * (size_t)c->aw.size +
      (size_t)(ix + kx0 * c->aw.dilation);
  const dw16_win k = {c->x + px * (size_t)c->c,
                      c->w + ((size_t)ky0 * (size_t)c->kw + (size_t)kx0) * cout,
                      ky1 - ky0,
                      kx1 > kx0 ? kx1 - kx0 : 0,
                      (size_t)c->aw.dilation * (size_t)c->c,
                      (size_t)c->ah.dilation * (size_t)c->aw.size * (size_t)c->c,
                      (size_t)c->kw * cout};
#if MT_MVE
  if (c->m == 1) {
    dw16_fast_mve(c, &k, y_px);
    return;
  }
#elif MT_DSP /* !MT_MVE */
  if (c->m == 1) {
    j = dw16_fast_dsp(c, &k, y_px);
  }
#endif /* MT_MVE */
  dw16_fast_c(c, &k, j, y_px);
}

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
    acc[j] = c->st.bias[o0 + j];
  }
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
  return mt_out16_n(acc, nb, c->st.mult + o0, c->st.shift + o0, c->st.lo, c->st.hi, y_px + o0);
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
        if (c.st.fast) {
          dw16_fast(&c, n, oh, ow, y);
          continue;
        }
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
