/*
 * mt_avg_pool2d_s8.c - average pooling with TOSA's integer arithmetic:
 * acc = sum over the in-bounds elements of (x - in_zp), y = clamp(rq(acc, reciprocal(count))
 * + out_zp), where count = divisor if divisor > 0, else kernel_h * kernel_w if
 * count_include_pad, else the number of in-bounds elements. The reciprocal is recomputed only
 * when count changes (at the borders). The window sum is vectorised over channels: MVE 8 per pass
 * (two int32x4 lanes of VLDRB-widened bytes, the tail predicated, requantized on vectors), DSP 4
 * per word (SXTAB16 into 16-bit lanes, windows of <= 256 elements), C 4 per pass (byte loads into
 * four accumulators), then one at a time.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"
#include "mt_pool16.h" /* an int16 x: mt_avg_pool2d_s16 */

/* mt_pool_axes reads the window attributes from attrs[0..7] */
#define AVG_ATTR_ORDER_OK                                                                          \
  (MT_AVG_POOL2D_KERNEL_H == 0 && MT_AVG_POOL2D_KERNEL_W == 1 && MT_AVG_POOL2D_STRIDE_H == 2 &&    \
   MT_AVG_POOL2D_PAD_TOP == 4 && MT_AVG_POOL2D_PAD_RIGHT == 7)
typedef char mt_avg_pool_attr_order[AVG_ATTR_ORDER_OK ? 1 : -1];

#define AVG_MAX_COUNT  (1 << 30) /* larger counts need a multiplier >= 2^31 */
#define AVG_MAX_WINDOW (1 << 23) /* valid elements of a window: |sum| <= 255 * 2^23 < 2^31 */

typedef struct {
  mt_axis ah, aw;
  int32_t fixed_count; /* divisor or kernel_h * kernel_w; 0 = count the in-bounds elements */
  int32_t count, mult, shift; /* the reciprocal of the last count */
  int32_t in_zp, out_zp, lo, hi;
} avg_ctx;

static void avg_reciprocal(avg_ctx *c, int32_t count)
{
  c->count = count;
  mt_reciprocal_scale(count, &c->mult, &c->shift);
}

static int avg_init(avg_ctx *c, const mt_op_args *a)
{
  const int32_t *at = a->attrs;
  const int64_t full = (int64_t)at[MT_AVG_POOL2D_KERNEL_H] * at[MT_AVG_POOL2D_KERNEL_W];
  const int32_t cip = at[MT_AVG_POOL2D_COUNT_INCLUDE_PAD], divisor = at[MT_AVG_POOL2D_DIVISOR];
  c->in_zp = at[MT_AVG_POOL2D_IN_ZP];
  c->out_zp = at[MT_AVG_POOL2D_OUT_ZP];
  c->lo = at[MT_AVG_POOL2D_ACT_MIN];
  c->hi = at[MT_AVG_POOL2D_ACT_MAX];
  c->count = 0;
  if (!mt_pool_axes(&c->ah, &c->aw, &a->in[MT_AVG_POOL2D_IN_X], &a->out[MT_AVG_POOL2D_OUT_Y], at) ||
      (cip != 0 && cip != 1) || divisor < 0 || divisor > AVG_MAX_COUNT || !mt_zp_ok(c->in_zp) ||
      !mt_zp_ok(c->out_zp) || !mt_act_ok(c->lo, c->hi)) {
    return 0;
  }
  /* the count: a divisor, kernel_h * kernel_w (count_include_pad) or the valid elements of the
   * window, at most min(kernel_h, H) * min(kernel_w, W) <= AVG_MAX_WINDOW */
  const int64_t win = (int64_t)(c->ah.kernel < c->ah.size ? c->ah.kernel : c->ah.size) *
                      (c->aw.kernel < c->aw.size ? c->aw.kernel : c->aw.size);
  if ((divisor == 0 && cip && full > AVG_MAX_COUNT) || win > AVG_MAX_WINDOW) {
    return 0;
  }
  c->fixed_count = divisor > 0 ? divisor : (cip ? (int32_t)full : 0);
  return 1;
}

/* The in-bounds taps of one output pixel's window: rows x cols, from x (channel 0; rows x_row
 * bytes apart, taps ch_n), and zp_sum = in_zp * rows * cols (every sum starts at -zp_sum). */
typedef struct {
  const int8_t *x;
  size_t x_row, ch_n;
  int32_t rows, cols;
  uint32_t zp_sum;
} avg_win;

#if MT_MVE
/* Every channel: 16 at a time as two int16x8 lanes while the window holds at most 256
 * elements (|sum| <= 256 * 128: exact on 16 bits), widened to int32 by halves (even and odd
 * channels); then 8 at a time as two int32x4 lanes, the tail predicated. Returns C. */
static MT_ALWAYS_INLINE size_t avg_channels_mve(const avg_ctx *c, const avg_win *v, int8_t *y_px)
{
  const int32x4_t mult = vdupq_n_s32(c->mult), sh_hi = vdupq_n_s32(32 - c->shift);
  const int32x4_t sh_lo = vdupq_n_s32(-c->shift);
  const uint32x4_t ev = vidupq_n_u32(0, 2), od = vidupq_n_u32(1, 2);
  const size_t ch_n = v->ch_n;
  size_t ch = 0;
  for (; ch + 16 <= ch_n && v->rows * v->cols <= 256; ch += 16) {
    int16x8_t s0 = vdupq_n_s16(0), s1 = s0;
    for (int32_t ky = 0; ky < v->rows; ky++) {
      const int8_t *xr = v->x + (size_t)ky * v->x_row + ch;
      for (int32_t kx = 0; kx < v->cols; kx++, xr += ch_n) {
        s0 = vaddq_s16(s0, vldrbq_s16(xr));
        s1 = vaddq_s16(s1, vldrbq_s16(xr + 8));
      }
    }
    const int32x4_t z = vdupq_n_s32(-(int32_t)v->zp_sum);
    int8_t *y = y_px + ch;
    vstrbq_scatter_offset_s32(y, ev,
                              mt_requantize_v(vaddq_s32(z, vmovlbq_s16(s0)), mult, sh_hi, sh_lo,
                                              c->out_zp, c->lo, c->hi));
    vstrbq_scatter_offset_s32(y, od,
                              mt_requantize_v(vaddq_s32(z, vmovltq_s16(s0)), mult, sh_hi, sh_lo,
                                              c->out_zp, c->lo, c->hi));
    vstrbq_scatter_offset_s32(y + 8, ev,
                              mt_requantize_v(vaddq_s32(z, vmovlbq_s16(s1)), mult, sh_hi, sh_lo,
                                              c->out_zp, c->lo, c->hi));
    vstrbq_scatter_offset_s32(y + 8, od,
                              mt_requantize_v(vaddq_s32(z, vmovltq_s16(s1)), mult, sh_hi, sh_lo,
                                              c->out_zp, c->lo, c->hi));
  }
  for (; ch < ch_n; ch += 8) {
    const uint32_t left = (uint32_t)(ch_n - ch);
    const mve_pred16_t p0 = vctp32q(left), p1 = vctp32q(left > 4 ? left - 4 : 0);
    int32x4_t a0 = vdupq_n_s32(-(int32_t)v->zp_sum), a1 = a0;
    for (int32_t ky = 0; ky < v->rows; ky++) {
      const int8_t *xr = v->x + (size_t)ky * v->x_row + ch;
      for (int32_t kx = 0; kx < v->cols; kx++, xr += ch_n) {
        a0 = vaddq_s32(a0, vldrbq_z_s32(xr, p0));
        a1 = vaddq_s32(a1, vldrbq_z_s32(xr + 4, p1));
      }
    }
    vstrbq_p_s32(y_px + ch, mt_requantize_v(a0, mult, sh_hi, sh_lo, c->out_zp, c->lo, c->hi), p0);
    vstrbq_p_s32(y_px + ch + 4, mt_requantize_v(a1, mult, sh_hi, sh_lo, c->out_zp, c->lo, c->hi),
                 p1);
  }
  return ch;
}
#endif /* MT_MVE */

#if MT_DSP
/* Channels from ch on, four per word in two SXTAB16 accumulators of 16-bit lanes, while the
 * window holds at most 256 elements (|sum| <= 256 * 128); returns the first channel left. */
static MT_ALWAYS_INLINE size_t avg_channels_dsp(const avg_ctx *c, const avg_win *v, size_t ch,
                                                int8_t *y_px)
{
  for (; ch + 4 <= v->ch_n && v->rows * v->cols <= 256; ch += 4) {
    int32_t s02 = 0, s13 = 0;
    for (int32_t ky = 0; ky < v->rows; ky++) {
      const int8_t *xr = v->x + (size_t)ky * v->x_row + ch;
      for (int32_t kx = v->cols; kx > 0; kx--, xr += v->ch_n) {
        const uint32_t w = mt_read_s8x4(xr);
        s02 = __sxtab16(s02, (int32_t)w);
        __asm__("sxtab16 %0, %0, %1, ror #8" : "+r"(s13) : "r"(w)); /* bytes 1 and 3 */
      }
    }
    const int32_t sums[4] = {(int16_t)(s02 & 0xFFFF), (int16_t)(s13 & 0xFFFF), s02 >> 16,
                             s13 >> 16};
    for (int32_t b = 0; b < 4; b++) {
      y_px[ch + (size_t)b] = mt_requantize(mt_wrap_s32((uint32_t)sums[b] - v->zp_sum), c->mult,
                                           c->shift, c->out_zp, c->lo, c->hi);
    }
  }
  return ch;
}
#endif /* MT_DSP */

/* Channels from ch on, four per pass in four accumulators (byte loads: one pointer step per
 * tap); returns the first channel left. */
static MT_ALWAYS_INLINE size_t avg_channels_c4(const avg_ctx *c, const avg_win *v, size_t ch,
                                               int8_t *y_px)
{
  for (; ch + 4 <= v->ch_n; ch += 4) {
    uint32_t a0 = 0u - v->zp_sum, a1 = a0, a2 = a0, a3 = a0;
    for (int32_t ky = 0; ky < v->rows; ky++) {
      const int8_t *xr = v->x + (size_t)ky * v->x_row + ch;
      for (int32_t kx = v->cols; kx > 0; kx--, xr += v->ch_n) {
        a0 += (uint32_t)(int32_t)xr[0];
        a1 += (uint32_t)(int32_t)xr[1];
        a2 += (uint32_t)(int32_t)xr[2];
        a3 += (uint32_t)(int32_t)xr[3];
      }
    }
    const uint32_t sums[4] = {a0, a1, a2, a3};
    for (int32_t b = 0; b < 4; b++) {
      y_px[ch + (size_t)b] =
          mt_requantize(mt_wrap_s32(sums[b]), c->mult, c->shift, c->out_zp, c->lo, c->hi);
    }
  }
  return ch;
}

/* Channels [ch, C) one at a time: the tail shared by every variant. */
static MT_ALWAYS_INLINE void avg_channels_c1(const avg_ctx *c, const avg_win *v, size_t ch,
                                             int8_t *y_px)
{
  for (; ch < v->ch_n; ch++) {
    uint32_t acc = 0u - v->zp_sum; /* sum of (x - in_zp) = sum of x - taps * in_zp */
    for (int32_t ky = 0; ky < v->rows; ky++) {
      const int8_t *xr = v->x + (size_t)ky * v->x_row + ch;
      for (int32_t kx = 0; kx < v->cols; kx++) {
        acc += (uint32_t)(int32_t)xr[(size_t)kx * v->ch_n];
      }
    }
    y_px[ch] = mt_requantize(mt_wrap_s32(acc), c->mult, c->shift, c->out_zp, c->lo, c->hi);
  }
}

/* y_px[ch] for the C channels of one output pixel. */
static void avg_pixel(avg_ctx *c, const int8_t *x_img, int32_t oh, int32_t ow, size_t ch_n,
                      int8_t *y_px)
{
  int32_t ky0, ky1, kx0, kx1;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1);
  const int32_t count = c->fixed_count ? c->fixed_count : (ky1 - ky0) * (kx1 - kx0);
  if (count != c->count) {
    avg_reciprocal(c, count);
  }
  const int32_t rows = ky1 - ky0, cols = kx1 - kx0;
  const size_t x_row = (size_t)c->aw.size * ch_n;
  const int8_t *x_win = x_img + (size_t)(iy + ky0) * x_row + (size_t)(ix + kx0) * ch_n;
  const avg_win v = {x_win, x_row, ch_n, rows, cols, (uint32_t)c->in_zp * (uint32_t)(rows * cols)};
  size_t ch = 0;
#if MT_MVE
  ch = avg_channels_mve(c, &v, y_px);
#else /* !MT_MVE */
#if MT_DSP
  ch = avg_channels_dsp(c, &v, ch, y_px);
#endif /* MT_DSP */
  ch = avg_channels_c4(c, &v, ch, y_px);
#endif /* MT_MVE */
  avg_channels_c1(c, &v, ch, y_px);
}

// x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
mt_status mt_avg_pool2d_s8(const mt_op_args *args)
{
  avg_ctx c;
  if (mt_args_ok(args, MT_AVG_POOL2D_N_INPUTS, MT_AVG_POOL2D_N_OUTPUTS, MT_AVG_POOL2D_N_ATTRS) &&
      args->in[MT_AVG_POOL2D_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_avg_pool2d_s16 != NULL ? mt_avg_pool2d_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  if (!mt_args_ok(args, MT_AVG_POOL2D_N_INPUTS, MT_AVG_POOL2D_N_OUTPUTS, MT_AVG_POOL2D_N_ATTRS) ||
      !avg_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_AVG_POOL2D_IN_X];
  const size_t ch_n = xt->rec->shape[3], x_img = (size_t)c.ah.size * (size_t)c.aw.size * ch_n;
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)args->out[MT_AVG_POOL2D_OUT_Y].data;
  for (uint32_t n = 0; n < xt->rec->shape[0]; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++) {
      for (int32_t ow = 0; ow < c.aw.out; ow++, y += ch_n) {
        avg_pixel(&c, x + n * x_img, oh, ow, ch_n, y);
      }
    }
  }
  return MT_STATUS_OK;
}
