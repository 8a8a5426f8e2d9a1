/*
 * mt_max_pool2d_s8.c - max over each window's in-bounds elements (padding never wins), then the
 * activation clamp. Per output pixel, a block of channels (a vector, a word or one channel) keeps
 * its running maximum in a register over the window's taps; no scratch.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"
#include "mt_pool16.h" /* an int16 x: mt_max_pool2d_s16 */

/* mt_pool_axes reads the window attributes from attrs[0..7] */
#define MAX_ATTR_ORDER_OK                                                                          \
  (MT_MAX_POOL2D_KERNEL_H == 0 && MT_MAX_POOL2D_KERNEL_W == 1 && MT_MAX_POOL2D_STRIDE_H == 2 &&    \
   MT_MAX_POOL2D_PAD_TOP == 4 && MT_MAX_POOL2D_PAD_RIGHT == 7)
typedef char mt_max_pool_attr_order[MAX_ATTR_ORDER_OK ? 1 : -1];

#if MT_MVE
/* Channels [0, 16) (one = 1, under p) or [0, 32) (one = 0, the second vector under p) of one
 * window: each vector's running maximum in a register over the taps. */
static MT_ALWAYS_INLINE void max_vectors_mve(const int8_t *r, int32_t rows, int32_t cols,
                                             size_t row_step, size_t c, int8x16_t vlo,
                                             int8x16_t vhi, mve_pred16_t p, int one, int8_t *y)
{
  int8x16_t m0 = vlo, m1 = vlo;
  for (int32_t ky = 0; ky < rows; ky++, r += row_step) {
    const int8_t *t = r;
    for (int32_t kx = 0; kx < cols; kx++, t += c) {
      if (one) {
        m0 = vmaxq_s8(m0, vldrbq_z_s8(t, p));
      } else {
        m0 = vmaxq_s8(m0, vldrbq_s8(t));
        m1 = vmaxq_s8(m1, vldrbq_z_s8(t + 16, p));
      }
    }
  }
  if (one) {
    vstrbq_p_s8(y, vminq_s8(m0, vhi), p);
  } else {
    vstrbq_s8(y, vminq_s8(m0, vhi));
    vstrbq_p_s8(y + 16, vminq_s8(m1, vhi), p);
  }
}
#endif /* MT_MVE */

#if MT_DSP
/* max of four int8 lanes: SSUB8 sets GE where v >= m, SEL takes v there */
static MT_ALWAYS_INLINE uint32_t max4(uint32_t m, uint32_t v)
{
  (void)__ssub8((int32_t)v, (int32_t)m);
  return (uint32_t)__sel((int32_t)v, (int32_t)m);
}

/* Channels [0, 4) (one = 1) or [0, 8) (one = 0) of one window, each word's running maximum in
 * a register over the taps; then min(m, hi) per lane (SEL where hi >= m). */
static MT_ALWAYS_INLINE void max_words_dsp(const int8_t *r, int32_t rows, int32_t cols,
                                           size_t row_step, size_t c, uint32_t lo4, uint32_t hi4,
                                           int one, int8_t *y)
{
  uint32_t m0 = lo4, m1 = lo4;
  for (int32_t ky = 0; ky < rows; ky++, r += row_step) {
    const int8_t *t = r;
    for (int32_t kx = 0; kx < cols; kx++, t += c) {
      m0 = max4(m0, mt_read_s8x4(t));
      if (!one) {
        m1 = max4(m1, mt_read_s8x4(t + 4));
      }
    }
  }
  for (int i = 0; i < (one ? 1 : 2); i++) {
    uint32_t m = i ? m1 : m0;
    (void)__ssub8((int32_t)hi4, (int32_t)m); /* GE where m <= hi */
    m = (uint32_t)__sel((int32_t)m, (int32_t)hi4);
    __builtin_memcpy(y + 4 * i, &m, 4);
  }
}
#endif /* MT_DSP */

/* y_px[c] = clamp(max over the window of x[.., c]) for C channels: the window's in-bounds taps
 * are rows x cols from xp (channel 0 of its first tap; rows row_step bytes apart, taps c). The
 * running maximum starts at act_min, so max(lo, taps...) is the max over the taps (there is at
 * least one: checked at entry) with the lower clamp fused; the upper clamp is one min at the end.
 * MVE: 32 channels per pass (two vectors, the second tail-predicated by VCTP), then 16 under a
 * predicate; DSP: 8 channels per pass (two words), then 4, then one at a time; pure C: the output
 * pixel holds the running maximum (the first tap copied, then a max per tap over contiguous
 * channels), clamped at the end. */
#if MT_MVE || MT_DSP
#define MAX_WINDOW_INLINE MT_ALWAYS_INLINE /* few live registers: inlined into the row walk */
#else
#define MAX_WINDOW_INLINE MT_NOINLINE /* inlined, the row walk's registers spill in its loop */
#endif
static MAX_WINDOW_INLINE void max_window(const int8_t *xp, int32_t rows, int32_t cols,
                                         size_t row_step, size_t c, int32_t lo, int32_t hi,
                                         int8_t *y_px)
{
  size_t ch = 0;
#if MT_MVE
  const int8x16_t vlo = vdupq_n_s8((int8_t)lo), vhi = vdupq_n_s8((int8_t)hi);
  for (; ch + 16 < c; ch += 32) { /* more than 16 channels left: two vectors */
    max_vectors_mve(xp + ch, rows, cols, row_step, c, vlo, vhi, vctp8q((uint32_t)(c - ch - 16)), 0,
                    y_px + ch);
  }
  if (ch < c) {
    max_vectors_mve(xp + ch, rows, cols, row_step, c, vlo, vhi, vctp8q((uint32_t)(c - ch)), 1,
                    y_px + ch);
    ch = c;
  }
#elif MT_DSP
  const uint32_t lo4 = 0x01010101u * (uint8_t)lo, hi4 = 0x01010101u * (uint8_t)hi;
  for (; ch + 8 <= c; ch += 8) {
    max_words_dsp(xp + ch, rows, cols, row_step, c, lo4, hi4, 0, y_px + ch);
  }
  if (ch + 4 <= c) {
    max_words_dsp(xp + ch, rows, cols, row_step, c, lo4, hi4, 1, y_px + ch);
    ch += 4;
  }
#else /* Armv6-M / Armv7-M: the pixel holds the running maximum, channels innermost */
  memcpy(y_px, xp, c);
  for (int32_t ky = 0; ky < rows; ky++) {
    for (int32_t kx = 0; kx < cols; kx++) {
      const int8_t *t = xp + (size_t)ky * row_step + (size_t)kx * c;
      for (size_t i = 0; i < c; i++) {
        if (t[i] > y_px[i]) {
          y_px[i] = t[i];
        }
      }
    }
  }
  for (; ch < c; ch++) {
    y_px[ch] = (int8_t)(y_px[ch] < lo ? lo : (y_px[ch] > hi ? hi : y_px[ch]));
  }
#endif /* MT_MVE, MT_DSP */
  for (; ch < c; ch++) { /* the DSP path's channel tail */
    const int8_t *r = xp + ch;
    int32_t best = lo;
    for (int32_t ky = 0; ky < rows; ky++, r += row_step) {
      const int8_t *t = r;
      for (int32_t kx = 0; kx < cols; kx++, t += c) {
        best = *t > best ? *t : best;
      }
    }
    y_px[ch] = (int8_t)(best > hi ? hi : best);
  }
}

/* Output row oh of one image (C channels): the row's taps found once, a column's only near the
 * left and right edges (elsewhere all kernel_w of them). */
static MT_NOINLINE void max_row(const mt_axis *ah, const mt_axis *aw, const int8_t *x_img,
                                int32_t oh, size_t c, int32_t lo, int32_t hi, int8_t *y_row)
{
  int32_t ky0, ky1, kx0 = 0, kx1 = aw->kernel;
  const int32_t iy = mt_axis_taps(ah, oh, &ky0, &ky1), w = aw->size;
  const size_t row_step = (size_t)w * c;
  const int8_t *row = x_img + (size_t)(iy + ky0) * row_step;
  for (int32_t ow = 0, ix = -aw->pad0; ow < aw->out; ow++, ix += aw->stride, y_row += c) {
    if (ix < 0 || ix > w - aw->kernel) {
      (void)mt_axis_taps(aw, ow, &kx0, &kx1);
    } else {
      kx0 = 0;
      kx1 = aw->kernel;
    }
    /* ix + kx0 >= 0: an in-bounds column */
    max_window(row + (size_t)(ix + kx0) * c, ky1 - ky0, kx1 - kx0, row_step, c, lo, hi, y_row);
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
  if (args->in[MT_MAX_POOL2D_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_max_pool2d_s16 != NULL ? mt_max_pool2d_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_MAX_POOL2D_IN_X], *yt = &args->out[MT_MAX_POOL2D_OUT_Y];
  const int32_t lo = args->attrs[MT_MAX_POOL2D_ACT_MIN], hi = args->attrs[MT_MAX_POOL2D_ACT_MAX];
  if (!mt_pool_axes(&ah, &aw, xt, yt, args->attrs) || !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t c = xt->rec->shape[3], x_img = (size_t)ah.size * (size_t)aw.size * c;
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  for (uint32_t n = 0; n < xt->rec->shape[0]; n++) {
    for (int32_t oh = 0; oh < ah.out && c == 1; oh++, y += aw.out) {
      max_row_c1(&ah, &aw, x + n * x_img, oh, lo, hi, y);
    }
    for (int32_t oh = 0; oh < ah.out && c != 1; oh++, y += (size_t)aw.out * c) {
      max_row(&ah, &aw, x + n * x_img, oh, c, lo, hi, y);
    }
  }
  return MT_STATUS_OK;
}
