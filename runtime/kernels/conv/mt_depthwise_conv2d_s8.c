/*
 * mt_depthwise_conv2d_s8.c - depthwise 2-D convolution, int8 NHWC, any depth multiplier M.
 *
 * Output channel c*M + m reads input channel c only. Per output pixel the in-bounds taps are
 * found once (padding contributes 0 and is never read); the channels then accumulate over the
 * window, adjacent channels together when M == 1 (they share every address step): 16 per pass
 * on MVE (whole blocks on int16 lanes, mt_depthwise_mve.h; the tail on four int32x4
 * accumulators, predicated), 4 on DSP (SXTAB16 adds x_off to two bytes at once, SMLABB/SMLATT)
 * and in C.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

typedef struct {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  mt_axis ah, aw;
  int32_t batch, c, m, kw;
  int32_t x_off, out_zp, act_min, act_max;
} dw_ctx;

/* The weight as (KH, KW, C*M): rank 3, or rank 4 with a leading 1 ("1HWC"). */
static const uint32_t *dw_weight_dims(const mt_tensor *w)
{
  if (w->rank == 4 && w->shape[0] == 1) {
    return &w->shape[1];
  }
  return w->rank == 3 ? w->shape : NULL;
}

static int dw_shapes_ok(const mt_op_args *a, const uint32_t *wd)
{
  const mt_tensor *x = &a->in[MT_DEPTHWISE_CONV2D_IN_X];
  const mt_tensor *y = &a->out[MT_DEPTHWISE_CONV2D_OUT_Y];
  const int32_t m = a->attrs[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  return wd != NULL && mt_tensor_ok(x, MT_DTYPE_INT8, 4) && mt_tensor_ok(y, MT_DTYPE_INT8, 4) &&
         mt_tensor_ok(&a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT], MT_DTYPE_INT8,
                      a->in[MT_DEPTHWISE_CONV2D_IN_WEIGHT].rank) &&
         m >= 1 && mt_dim(wd[2]) >= 0 && (uint64_t)x->shape[3] * (uint32_t)m == wd[2] &&
         y->shape[0] == x->shape[0] && y->shape[3] == wd[2] &&
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
  c->batch = mt_dim(x->shape[0]);
  c->c = (int32_t)x->shape[3];
  c->m = at[MT_DEPTHWISE_CONV2D_DEPTH_MULTIPLIER];
  c->kw = mt_dim(wd[1]);
  c->x_off = mt_zp_ok(at[MT_DEPTHWISE_CONV2D_IN_ZP]) ? -at[MT_DEPTHWISE_CONV2D_IN_ZP] : 0;
  c->out_zp = at[MT_DEPTHWISE_CONV2D_OUT_ZP];
  c->act_min = at[MT_DEPTHWISE_CONV2D_ACT_MIN];
  c->act_max = at[MT_DEPTHWISE_CONV2D_ACT_MAX];
  return c->batch >= 0 &&
         mt_axis_init(&c->ah, x->shape[1], mt_dim(wd[0]), at[MT_DEPTHWISE_CONV2D_STRIDE_H],
                      at[MT_DEPTHWISE_CONV2D_DILATION_H], at[MT_DEPTHWISE_CONV2D_PAD_TOP],
                      at[MT_DEPTHWISE_CONV2D_PAD_BOTTOM], y->shape[1]) &&
         mt_axis_init(&c->aw, x->shape[2], c->kw, at[MT_DEPTHWISE_CONV2D_STRIDE_W],
                      at[MT_DEPTHWISE_CONV2D_DILATION_W], at[MT_DEPTHWISE_CONV2D_PAD_LEFT],
                      at[MT_DEPTHWISE_CONV2D_PAD_RIGHT], y->shape[2]) &&
         mt_zp_ok(at[MT_DEPTHWISE_CONV2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) && mt_scales_ok(c->mult, c->shift, wd[2]);
}

/* The taps of one output pixel that land inside the input: rows [ky0, ky1), cols [kx0, kx1). */
typedef struct {
  int32_t ky0, ky1, kx0, kx1;
} dw_win;

#if MT_MVE
#define DW_BLOCK 16 /* adjacent channels per pass when M == 1: four int32x4 accumulators */
#else
#define DW_BLOCK 4
#endif /* MT_MVE */

#if MT_MVE
/* The taps of one kernel row for nb < 16 channels (dw_block): whole quarters (nb = 4, 8, 12)
 * unpredicated, else every lane predicated; kept apart so that the 16-channel loop keeps its
 * registers. */
static MT_NOINLINE void dw_taps_part(const int8_t *xp, const int8_t *wp, size_t x_tap, size_t cm,
                                     int32_t cols, int32_t off, int32_t nb, int32x4_t acc[4])
{
  const mve_pred16_t p0 = vctp32q((uint32_t)nb), p1 = vctp32q((uint32_t)(nb > 4 ? nb - 4 : 0));
  const mve_pred16_t p2 = vctp32q((uint32_t)(nb > 8 ? nb - 8 : 0));
  const mve_pred16_t p3 = vctp32q((uint32_t)(nb > 12 ? nb - 12 : 0));
  int32x4_t v0 = acc[0], v1 = acc[1], v2 = acc[2], v3 = acc[3];
  if (nb % 4 == 0) { /* 4, 8 or 12 channels: whole quarters, unpredicated */
    for (int32_t kx = 0; kx < cols; kx++, xp += x_tap, wp += cm) {
      v0 = vaddq_s32(v0, vmulq_s32(vaddq_n_s32(vldrbq_s32(xp), off), vldrbq_s32(wp)));
      if (nb > 4) {
        v1 = vaddq_s32(v1, vmulq_s32(vaddq_n_s32(vldrbq_s32(xp + 4), off), vldrbq_s32(wp + 4)));
      }
      if (nb > 8) {
        v2 = vaddq_s32(v2, vmulq_s32(vaddq_n_s32(vldrbq_s32(xp + 8), off), vldrbq_s32(wp + 8)));
      }
    }
  } else {
    for (int32_t kx = 0; kx < cols; kx++, xp += x_tap, wp += cm) {
      v0 = vaddq_s32(v0, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp, p0), off), vldrbq_z_s32(wp, p0)));
      v1 = vaddq_s32(v1, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp + 4, p1), off),
                                   vldrbq_z_s32(wp + 4, p1)));
      v2 = vaddq_s32(v2, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp + 8, p2), off),
                                   vldrbq_z_s32(wp + 8, p2)));
      v3 = vaddq_s32(v3, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp + 12, p3), off),
                                   vldrbq_z_s32(wp + 12, p3)));
    }
  }
  acc[0] = v0;
  acc[1] = v1;
  acc[2] = v2;
  acc[3] = v3;
}
#endif /* MT_MVE */

#include "mt_depthwise_mve.h" /* dw_blocks16: M == 1, 16 channels at a time on MVE */

/* y_px[oc + b], b < nb: the window sums of nb adjacent channels (x, w at the window's first
 * in-bounds tap; nb <= DW_BLOCK when M == 1, else 1) plus bias, requantized. Per tap x steps
 * C * dilation bytes, w steps C * M bytes. */
static MT_NOINLINE void dw_block(const dw_ctx *c, const dw_win *v, const int8_t *x,
                                 const int8_t *w, int32_t oc, int32_t nb, int8_t *y_px)
{
  const size_t cm = (size_t)c->c * (size_t)c->m, x_tap = (size_t)c->aw.dilation * (size_t)c->c;
  const size_t x_row = (size_t)c->ah.dilation * (size_t)c->aw.size * (size_t)c->c;
  const size_t w_row = (size_t)c->kw * cm;
  const int32_t off = c->x_off, rows = v->ky1 - v->ky0, cols = v->kx1 - v->kx0;
  uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#if MT_MVE
  if (nb > 1) { /* 16 channels as four int32x4 lanes, the tail predicated */
    const mve_pred16_t p0 = vctp32q((uint32_t)nb), p1 = vctp32q((uint32_t)(nb > 4 ? nb - 4 : 0));
    const mve_pred16_t p2 = vctp32q((uint32_t)(nb > 8 ? nb - 8 : 0));
    const mve_pred16_t p3 = vctp32q((uint32_t)(nb > 12 ? nb - 12 : 0));
    const int32_t *bias = c->bias + oc;
    int32x4_t v0 = vldrwq_z_s32(bias, p0), v1 = vldrwq_z_s32(bias + 4, p1);
    int32x4_t v2 = vldrwq_z_s32(bias + 8, p2), v3 = vldrwq_z_s32(bias + 12, p3);
    for (int32_t ky = 0; ky < rows; ky++) {
      const int8_t *xp = x + (size_t)ky * x_row, *wp = w + (size_t)ky * w_row;
      int32x4_t part[4] = {v0, v1, v2, v3};
      dw_taps_part(xp, wp, x_tap, cm, cols, off, nb, part);
      v0 = part[0];
      v1 = part[1];
      v2 = part[2];
      v3 = part[3];
    }
    const int32_t *m = c->mult + oc, *s = c->shift + oc;
    int8_t *y = y_px + oc;
    mt_requantize4_v(v0, m, s, nb, c->out_zp, c->act_min, c->act_max, y);
    for (int32_t q = 4; q < nb; q += 4) {
      const int32x4_t vq = q == 4 ? v1 : (q == 8 ? v2 : v3);
      mt_requantize4_v(vq, m + q, s + q, nb - q, c->out_zp, c->act_min, c->act_max, y + q);
    }
    return;
  }
#endif /* MT_MVE */
  for (int32_t ky = 0; ky < rows; ky++) {
    const int8_t *xp = x + (size_t)ky * x_row, *wp = w + (size_t)ky * w_row;
    int32_t kx = 0;
    if (nb == 1) {
      for (; kx < cols; kx++, xp += x_tap, wp += cm) {
        a0 += (uint32_t)((xp[0] + off) * wp[0]);
      }
      continue;
    }
#if !MT_MVE && MT_DSP
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) * 0x00010001u; /* x_off in both halves */
    for (; kx < cols; kx++, xp += x_tap, wp += cm) {
      const uint32_t xv = mt_read_s8x4(xp), wv = mt_read_s8x4(wp);
      const int32_t x02 = __sxtab16((int32_t)off2, (int32_t)xv);
      int32_t x13; /* SXTAB16 with ROR #8 (gcc does not fold the rotate) */
      __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(x13) : "r"(off2), "r"(xv));
      const int32_t w02 = __sxtb16((int32_t)wv), w13 = mt_sxtb16_ror8(wv);
      a0 = (uint32_t)__smlabb(x02, w02, (int32_t)a0);
      a1 = (uint32_t)__smlabb(x13, w13, (int32_t)a1);
      a2 = (uint32_t)__smlatt(x02, w02, (int32_t)a2);
      a3 = (uint32_t)__smlatt(x13, w13, (int32_t)a3);
    }
#endif /* !MT_MVE && MT_DSP */
    for (; kx < cols; kx++, xp += x_tap, wp += cm) {
      a0 += (uint32_t)((xp[0] + off) * wp[0]);
      a1 += (uint32_t)((xp[1] + off) * wp[1]);
      a2 += (uint32_t)((xp[2] + off) * wp[2]);
      a3 += (uint32_t)((xp[3] + off) * wp[3]);
    }
  }
  const uint32_t acc[4] = {a0, a1, a2, a3};
  for (int32_t b = 0; b < nb; b++) {
    const int32_t o = oc + b;
    y_px[o] = mt_requantize(mt_wrap_s32(acc[b] + (uint32_t)c->bias[o]), c->mult[o], c->shift[o],
                            c->out_zp, c->act_min, c->act_max);
  }
}

/* One output pixel: y_px[c*M + m] for every channel; with M == 1 DW_BLOCK channels at a time. */
static void dw_pixel(const dw_ctx *c, const int8_t *x_img, int32_t oh, int32_t ow, int8_t *y_px)
{
  dw_win v;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &v.ky0, &v.ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &v.kx0, &v.kx1);
  const int8_t *x_win = x_img, *w_win = c->w; /* tap (ky0, kx0) */
  if (v.kx1 == v.kx0 || v.ky1 == v.ky0) { /* the window lies in the padding: y = rq(bias) */
    v.ky1 = v.ky0;
  } else {
    x_win += ((size_t)(iy + v.ky0 * c->ah.dilation) * (size_t)c->aw.size +
              (size_t)(ix + v.kx0 * c->aw.dilation)) * (size_t)c->c;
    w_win += ((size_t)v.ky0 * (size_t)c->kw + (size_t)v.kx0) * (size_t)c->c * (size_t)c->m;
  }
  int32_t oc = 0, ch = 0;
#if MT_MVE
  if (c->m == 1 && c->c >= 16) { /* whole blocks of 16 channels on int16 lanes */
    ch = oc = c->c & ~15;
    dw_blocks16(c, &v, x_win, w_win, c->c / 16, y_px);
  }
#endif /* MT_MVE */
  for (; ch < c->c;) {
    const int32_t left = c->c - ch, nb = left < DW_BLOCK ? left : DW_BLOCK;
    if (c->m == 1 && (MT_MVE || nb == DW_BLOCK)) { /* MVE predicates the tail */
      dw_block(c, &v, x_win + ch, w_win + oc, oc, nb, y_px);
      ch += nb;
      oc += nb;
      continue;
    }
    for (int32_t m = 0; m < c->m; m++, oc++) {
      dw_block(c, &v, x_win + ch, w_win + oc, oc, 1, y_px);
    }
    ch++;
  }
}

// x: (N, H, W, C) int8; weight: (KH, KW, C*M) or (1, KH, KW, C*M) int8
// bias, mult, shift: (C*M,) int32  ->  y: (N, Ho, Wo, C*M) int8
mt_status mt_depthwise_conv2d_s8(const mt_op_args *args)
{
  dw_ctx c;
  if (!dw_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t x_img = (size_t)c.ah.size * (size_t)c.aw.size * (size_t)c.c;
  const size_t y_px = (size_t)c.c * (size_t)c.m;
  int8_t *y = c.y;
  for (int32_t n = 0; n < c.batch; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++) {
      for (int32_t ow = 0; ow < c.aw.out; ow++, y += y_px) {
        dw_pixel(&c, c.x + (size_t)n * x_img, oh, ow, y);
      }
    }
  }
  return MT_STATUS_OK;
}
