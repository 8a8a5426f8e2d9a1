/*
 * mt_depthwise_conv2d_s8.c - depthwise 2-D convolution, int8 NHWC, any depth multiplier M.
 *
 * Output channel c*M + m reads input channel c only. The in-bounds kernel rows are found once
 * per output row and the in-bounds columns once per pixel (padding contributes 0 and is never
 * read); a window of one column (1-D kernels over time) is walked as one run along its rows.
 * With M == 1 adjacent channels share every address step and accumulate together: 16 or 8 per
 * pass on MVE (int16 lanes, mt_depthwise_mve.h), 4 on DSP (SXTAB16 adds x_off to two bytes at
 * once, SMLABB/SMLATT) and in C (a full window adds x_off * sum(w) once instead of x_off per
 * tap); other channels (M > 1, tails) one at a time. When every shift exceeds 32 the output
 * stage needs the high product word only (mt_depthwise_out.h, mt_depthwise_mve.h).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"
#include "mt_mac16.h" /* an int16 x: mt_depthwise_conv2d_s16 */

#define DW_XW_MAX 64 /* C: the pure C path adds x_off * sum(w) once per full window */

typedef struct {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  mt_axis ah, aw;
  int32_t batch, c, m, kw;
  int32_t x_off, out_zp, act_min, act_max;
  size_t x_tap, x_row, w_row; /* bytes per kernel column / row step of x and of w */
  int32_t rq_hi_only; /* every shift > 32 */
#if !MT_MVE && !MT_DSP
  int32_t n_taps; /* KH * KW when xw holds the sums below, else 0 */
  uint32_t xw[DW_XW_MAX]; /* x_off * the sum of channel c's weights (M == 1) */
#endif /* !MT_MVE && !MT_DSP */
} dw_ctx;

/* How the in-bounds taps of one window are walked: rows runs of cols taps; per tap x steps xt
 * and w steps wt, per run xrs and wrs more. A window of one column is one run along its rows. */
typedef struct {
  size_t xt, wt, xrs, wrs;
  int32_t rows, cols;
} dw_walk;

/* The weight as (KH, KW, C*M): rank 3, or rank 4 with a leading 1 ("1HWC"). */
static const uint32_t *dw_weight_dims(const mt_tensor *w)
{
  if (w->rec->rank == 4 && w->rec->shape[0] == 1) {
    return &w->rec->shape[1];
  }
  return w->rec->rank == 3 ? w->rec->shape : NULL;
}

static int dw_shapes_ok(const mt_op_args *a, const uint32_t *wd)
{
  const mt_tensor *x = &a->in[MT_DEPTHWISE_CONV2D_IN_X];
  const mt_tensor *y = &a->out[MT_DEPTHWISE_CONV2D_OUT_Y];
  const int32_t m = a->attrs[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  return wd != NULL && mt_tensor_ok(x, MT_DTYPE_INT8, 4) && mt_tensor_ok(y, MT_DTYPE_INT8, 4) &&
         mt_tensor_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT], MT_DTYPE_INT8,
                      a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT].rec->rank) &&
         m >= 1 && mt_dim(wd[2]) >= 0 && (uint64_t)x->rec->shape[3] * (uint32_t)m == wd[2] &&
         y->rec->shape[0] == x->rec->shape[0] && y->rec->shape[3] == wd[2] &&
         mt_vec_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_BIAS], wd[2]) &&
         mt_vec_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_MULT], wd[2]) &&
         mt_vec_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT], wd[2]);
}

static int dw_init(dw_ctx *c, const mt_op_args *a)
{
  if (!mt_args_ok(a, MT_DEPTHWISE_CONV2D_N_INPUTS, MT_DEPTHWISE_CONV2D_N_OUTPUTS,
                  MT_DEPTHWISE_CONV2D_N_ATTRS)) {
    return 0;
  }
  const uint32_t *wd = dw_weight_dims(&a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT]);
  if (!dw_shapes_ok(a, wd)) {
    return 0;
  }
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_DEPTHWISE_CONV2D_IN_X], *y = &a->out[MT_DEPTHWISE_CONV2D_OUT_Y];
  c->x = (const int8_t *)x->data;
  c->w = (const int8_t *)a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT].data;
  c->bias = (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_BIAS].data;
  c->mult = (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_MULT].data;
  c->shift = (const int32_t *)a->in[MT_DEPTHWISE_CONV2D_IN_SHIFT].data;
  c->y = (int8_t *)y->data;
  c->batch = mt_dim(x->rec->shape[0]);
  c->c = (int32_t)x->rec->shape[3];
  c->m = at[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  c->kw = mt_dim(wd[1]);
  c->x_off = mt_zp_ok(at[MT_DEPTHWISE_CONV2D_IN_ZP]) ? -at[MT_DEPTHWISE_CONV2D_IN_ZP] : 0;
  c->out_zp = at[MT_DEPTHWISE_CONV2D_OUT_ZP];
  c->act_min = at[MT_DEPTHWISE_CONV2D_ACT_MIN];
  c->act_max = at[MT_DEPTHWISE_CONV2D_ACT_MAX];
  c->x_tap = (size_t)at[MT_DEPTHWISE_CONV2D_DILATION_W] * (size_t)c->c;
  c->x_row = (size_t)at[MT_DEPTHWISE_CONV2D_DILATION_H] * x->rec->shape[2] * (size_t)c->c;
  c->w_row = (size_t)c->kw * wd[2];
  c->rq_hi_only = 1;
  for (uint32_t o = 0; o < wd[2]; o++) {
    c->rq_hi_only &= c->shift[o] > 32;
  }
#if !MT_MVE && !MT_DSP
  c->n_taps =
      c->m == 1 && c->c <= DW_XW_MAX && wd[0] <= 64 && wd[1] <= 64 ? (int32_t)(wd[0] * wd[1]) : 0;
  for (int32_t ch = 0; ch < c->c && c->n_taps > 0; ch++) {
    uint32_t s = 0;
    for (int32_t t = 0; t < c->n_taps; t++) {
      s += (uint32_t)c->w[(size_t)t * (size_t)c->c + (size_t)ch];
    }
    c->xw[ch] = s * (uint32_t)c->x_off;
  }
#endif /* !MT_MVE && !MT_DSP */
  return c->batch >= 0 &&
         mt_axis_init(&c->ah, x->rec->shape[1], mt_dim(wd[0]), at[MT_DEPTHWISE_CONV2D_STRIDE_H],
                      at[MT_DEPTHWISE_CONV2D_DILATION_H], at[MT_DEPTHWISE_CONV2D_PAD_TOP],
                      at[MT_DEPTHWISE_CONV2D_PAD_BOTTOM], y->rec->shape[1]) &&
         mt_axis_init(&c->aw, x->rec->shape[2], c->kw, at[MT_DEPTHWISE_CONV2D_STRIDE_W],
                      at[MT_DEPTHWISE_CONV2D_DILATION_W], at[MT_DEPTHWISE_CONV2D_PAD_LEFT],
                      at[MT_DEPTHWISE_CONV2D_PAD_RIGHT], y->rec->shape[2]) &&
         mt_zp_ok(at[MT_DEPTHWISE_CONV2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) && mt_scales_ok(c->mult, c->shift, wd[2]);
}

/* y[o] from the window sum acc of output channel o (bias not yet added). */
static inline int8_t dw_out(const dw_ctx *c, uint32_t acc, int32_t o)
{
  return mt_requantize(mt_wrap_s32(acc + (uint32_t)c->bias[o]), c->mult[o], c->shift[o], c->out_zp,
                       c->act_min, c->act_max);
}

/* The window sum of one output channel: x, w at its first in-bounds tap. */
static MT_NOINLINE uint32_t dw_one(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                   const int8_t *w)
{
  uint32_t a = 0;
  for (int32_t r = 0; r < k->rows; r++, x += k->xrs, w += k->wrs) {
    for (int32_t t = 0; t < k->cols; t++, x += k->xt, w += k->wt) {
      a += (uint32_t)((*x + c->x_off) * *w);
    }
  }
  return a;
}

/* Four channels' products of one tap, x + x_off: xp[i] + O (a0..a3, xp, wp in scope). */
#define DW_MAC4(O)                                                                                 \
  a0 += (uint32_t)((xp[0] + (O)) * wp[0]);                                                         \
  a1 += (uint32_t)((xp[1] + (O)) * wp[1]);                                                         \
  a2 += (uint32_t)((xp[2] + (O)) * wp[2]);                                                         \
  a3 += (uint32_t)((xp[3] + (O)) * wp[3])

#include "mt_depthwise_mve.h" /* dw_pixel_mve: M == 1, every channel of a pixel on MVE */

#include "mt_depthwise_out.h" /* dw_store, dw_store4_hi, dw_store_4, dw_tail: the DSP/C output */

#include "mt_depthwise_dsp.h" /* dw_pixel_dsp: M == 1, four channels per pass on DSP */

#if !MT_MVE && !MT_DSP
/* M == 1 in C: y[0, C) of one pixel, x and w at its first in-bounds tap, four channels per
 * pass; a full window adds x_off * sum(w) once (xw) instead of x_off per tap. */
static MT_ALWAYS_INLINE void dw_pixel_c(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                        const int8_t *w, int8_t *y)
{
  int32_t ch = 0;
  const size_t x_tap = k->xt, cm = k->wt, xrs = k->xrs, wrs = k->wrs;
  const int32_t off = c->x_off, n = c->c, rows = k->rows, cols = k->cols;
  const int folded = c->n_taps > 0 && rows * cols == c->n_taps;
  const int32_t o = folded ? 0 : off;
  for (; n - ch >= 4; ch += 4) {
    const int32_t *b = c->bias + ch; /* distinct starting values (gcc would merge four zeros) */
    uint32_t a0 = (uint32_t)b[0], a1 = (uint32_t)b[1], a2 = (uint32_t)b[2], a3 = (uint32_t)b[3];
    const int8_t *xp = x + ch, *wp = w + ch;
    if (folded) { /* a full window: x_off * sum(w) added here, x taken as it is below */
      a0 += c->xw[ch];
      a1 += c->xw[ch + 1];
      a2 += c->xw[ch + 2];
      a3 += c->xw[ch + 3];
    }
    for (int32_t ky = 0; ky < rows; ky++, xp += xrs, wp += wrs) {
      if (x_tap == cm) { /* one step for x and w: a register fewer for gcc */
        const int8_t *const x_end = xp + (size_t)cols * cm;
        if (folded) {
          for (; xp != x_end; xp += cm, wp += cm) {
            DW_MAC4(0);
          }
          continue;
        }
        for (; xp != x_end; xp += cm, wp += cm) {
          DW_MAC4(off);
        }
        continue;
      }
      for (int32_t kx = 0; kx < cols; kx++, xp += x_tap, wp += cm) {
        DW_MAC4(o);
      }
    }
    dw_store_4(c, a0, a1, a2, a3, ch, y);
  }
  dw_tail(c, k, x, w, ch, n, y);
}
#endif /* !MT_MVE && !MT_DSP */

/* M == 1: y[0, C) of one pixel, x and w at its first in-bounds tap. */
static MT_ALWAYS_INLINE void dw_pixel_m1(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                         const int8_t *w, dw_blk *par, int8_t *y)
{
#if MT_MVE
  dw_pixel_mve(c, k, x, w, par, y);
#elif MT_DSP
  (void)par;
  dw_pixel_dsp(c, k, x, w, y);
#else /* !MT_MVE && !MT_DSP */
  (void)par;
  dw_pixel_c(c, k, x, w, y);
#endif /* MT_MVE, MT_DSP */
}

/* One output row of image n: the kernel rows in bounds are the same for every pixel. */
static MT_NOINLINE void dw_row(const dw_ctx *c, const int8_t *x_img, int32_t oh, int8_t *y)
{
  int32_t ky0, ky1, kx0, kx1;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1), rows = ky1 - ky0;
  dw_walk k = {0, 0, 0, 0, 0, 0};
  dw_blk par;
#if MT_MVE
  dw_blk_init(c, &par);
#endif /* MT_MVE */
  int32_t k_cols = -1; /* the cols k was made for */
  const int32_t cm = c->c * c->m;
  const int8_t *xr = x_img, *wr = c->w + (size_t)ky0 * c->w_row;
  if (rows > 0) {
    xr += (size_t)(iy + ky0 * c->ah.dilation) * (size_t)c->aw.size * (size_t)c->c;
  }
  for (int32_t ow = 0; ow < c->aw.out; ow++, y += cm) {
    const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1), cols = rows > 0 ? kx1 - kx0 : 0;
    const int8_t *xp = xr, *wp = wr + (size_t)kx0 * (size_t)cm;
    if (cols != k_cols) { /* the walk changes at the borders only */
      k_cols = cols;
      k = (dw_walk){c->x_tap, (size_t)cm, 0, 0, cols > 0 ? rows : 0, cols};
      k.xrs = c->x_row - (size_t)cols * k.xt;
      k.wrs = c->w_row - (size_t)cols * k.wt;
      if (cols == 1) { /* one run along the rows */
        k = (dw_walk){c->x_row, c->w_row, 0, 0, 1, rows};
      }
    }
    if (cols > 0) {
      xp += (size_t)(ix + kx0 * c->aw.dilation) * (size_t)c->c;
    }
    if (c->m == 1) {
      dw_pixel_m1(c, &k, xp, wp, &par, y);
      continue;
    }
    for (int32_t o = 0; o < cm; o++) {
      y[o] = dw_out(c, dw_one(c, &k, xp + o / c->m, wp + o), o);
    }
  }
}

// x: (N, H, W, C) int8; weight: (KH, KW, C*M) or (1, KH, KW, C*M) int8
// bias, mult, shift: (C*M,) int32  ->  y: (N, Ho, Wo, C*M) int8
mt_status mt_depthwise_conv2d_s8(const mt_op_args *args)
{
  dw_ctx c;
  if (mt_args_ok(args, MT_DEPTHWISE_CONV2D_N_INPUTS, MT_DEPTHWISE_CONV2D_N_OUTPUTS,
                 MT_DEPTHWISE_CONV2D_N_ATTRS) &&
      args->in[MT_DEPTHWISE_CONV2D_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_depthwise_conv2d_s16 != NULL ? mt_depthwise_conv2d_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  if (!dw_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t x_img = (size_t)c.ah.size * (size_t)c.aw.size * (size_t)c.c;
  const size_t y_row = (size_t)c.aw.out * (size_t)c.c * (size_t)c.m;
  int8_t *y = c.y;
  for (int32_t n = 0; n < c.batch; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++, y += y_row) {
      dw_row(&c, c.x + (size_t)n * x_img, oh, y);
    }
  }
  return MT_STATUS_OK;
}
