/*
 * mt_conv_transpose2d_s8.c - grouped transposed 2-D convolution, int8 NHWC in and out,
 * per-channel requantization.
 *
 * Output-stationary: input pixel (iy, ix) adds (x - in_zp) * w[o, ky, kx] to output pixel
 * (iy * stride_h - pad_top + ky * dilation_h, ...), so output row oy takes the taps ky with
 * ky * dilation_h == oy + pad_top (mod stride_h): every `step` = stride / gcd(stride,
 * dilation) taps (mt_conv_transpose_axis.h). No zeros are inserted between input pixels: each
 * output sums only the taps of its phase (rows oy == ry, columns ox == rx mod stride).
 *
 * Pixels go phase by phase. A phase's weights (its taps, for up to CT_WP_MAX bytes of output
 * channels) are re-laid once as rows of k_p = taps * Cg bytes; each pixel's window (the same
 * taps, those reading outside the input filled with in_zp, which adds nothing) is gathered,
 * and MT_PX pixels of a phase row run against every row at once (mt_dot_px_s8, the MVE / DSP /
 * C loops of conv2d). Windows longer than CT_COL_MAX / MT_PX go tap by tap instead (ct_pixel:
 * the taps inside the input only, one run of Cg bytes each, mt_dot_rows_s8).
 *
 * Zero point: the dot loops sum raw x * w; a pixel starts from base = bias + x_off * (sum of
 * the weights of its taps), computed once per phase (tap by tap: when the set changes).
 * Stack: 3.3 KiB (weights, windows, accumulators), as conv2d's gathered windows.
 */
#include "mt_conv_transpose_axis.h"
#include "mt_kernel_mac.h"
#include "mt_kernel_mac_px.h"
#include "mt_kernels.h"

#define CT_CHUNK   MT_MAC_CHUNK /* output channels per pass */
#define CT_WP_MAX  2048 /* bytes of a phase's re-laid weights (on the stack) */
#define CT_COL_MAX 512 /* bytes of gathered windows: MT_PX of up to CT_COL_MAX / MT_PX */

typedef struct {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  ct_axis ah, aw;
  int32_t batch, cin, cg, cout_g, groups, kh, kw;
  int32_t x_off, out_zp, act_min, act_max;
  size_t k; /* weights per output channel: KH * KW * Cin/groups */
} ct_ctx;

static int ct_init(ct_ctx *c, const mt_op_args *a)
{
  if (!mt_args_ok(a, MT_CONV_TRANSPOSE2D_N_INPUTS, MT_CONV_TRANSPOSE2D_N_OUTPUTS,
                  MT_CONV_TRANSPOSE2D_N_ATTRS)) {
    return 0;
  }
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_CONV_TRANSPOSE2D_IN_X], *w = &a->in[MT_CONV_TRANSPOSE2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_CONV_TRANSPOSE2D_OUT_Y];
  const int32_t groups = at[MT_CONV_TRANSPOSE2D_GROUPS];
  const uint32_t cout = w->shape[0];
  if (!mt_tensor_ok(x, MT_DTYPE_INT8, 4) || !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, 4) || groups < 1 || mt_dim(x->shape[3]) < 0 ||
      mt_dim(cout) < 0 || mt_dim(w->shape[3]) < 0 || mt_dim(x->shape[0]) < 0 ||
      (uint64_t)w->shape[3] * (uint32_t)groups != x->shape[3] || cout % (uint32_t)groups != 0 ||
      y->shape[0] != x->shape[0] || y->shape[3] != cout ||
      !mt_vec_ok(&a->in[MT_CONV_TRANSPOSE2D_IN_BIAS], cout) ||
      !mt_vec_ok(&a->in[MT_CONV_TRANSPOSE2D_IN_MULT], cout) ||
      !mt_vec_ok(&a->in[MT_CONV_TRANSPOSE2D_IN_SHIFT], cout)) {
    return 0;
  }
  c->x = (const int8_t *)x->data;
  c->w = (const int8_t *)w->data;
  c->bias = (const int32_t *)a->in[MT_CONV_TRANSPOSE2D_IN_BIAS].data;
  c->mult = (const int32_t *)a->in[MT_CONV_TRANSPOSE2D_IN_MULT].data;
  c->shift = (const int32_t *)a->in[MT_CONV_TRANSPOSE2D_IN_SHIFT].data;
  c->y = (int8_t *)y->data;
  c->batch = (int32_t)x->shape[0];
  c->cin = (int32_t)x->shape[3];
  c->cg = (int32_t)w->shape[3];
  c->groups = groups;
  c->cout_g = (int32_t)cout / groups;
  c->kh = mt_dim(w->shape[1]);
  c->kw = mt_dim(w->shape[2]);
  c->x_off = mt_zp_ok(at[MT_CONV_TRANSPOSE2D_IN_ZP]) ? -at[MT_CONV_TRANSPOSE2D_IN_ZP] : 0;
  c->out_zp = at[MT_CONV_TRANSPOSE2D_OUT_ZP];
  c->act_min = at[MT_CONV_TRANSPOSE2D_ACT_MIN];
  c->act_max = at[MT_CONV_TRANSPOSE2D_ACT_MAX];
  c->k = (size_t)c->kh * (size_t)c->kw * (size_t)c->cg;
  return c->kh > 0 && c->kw > 0 &&
         ct_axis_init(&c->ah, x->shape[1], c->kh, at[MT_CONV_TRANSPOSE2D_STRIDE_H],
                      at[MT_CONV_TRANSPOSE2D_DILATION_H], at[MT_CONV_TRANSPOSE2D_PAD_TOP],
                      at[MT_CONV_TRANSPOSE2D_PAD_BOTTOM], y->shape[1]) &&
         ct_axis_init(&c->aw, x->shape[2], c->kw, at[MT_CONV_TRANSPOSE2D_STRIDE_W],
                      at[MT_CONV_TRANSPOSE2D_DILATION_W], at[MT_CONV_TRANSPOSE2D_PAD_LEFT],
                      at[MT_CONV_TRANSPOSE2D_PAD_RIGHT], y->shape[2]) &&
         mt_zp_ok(at[MT_CONV_TRANSPOSE2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) && mt_mac_scales_ok(c->mult, c->shift, cout) &&
         (int64_t)c->batch * c->ah.out * c->aw.out <= INT32_MAX;
}

/* The chunk's output channels [oc0, oc0 + nc) of output pixel y_px from the taps rows x cols;
 * x_g: the image's group g input channel 0; base: bias + x_off * sum of those taps' weights. */
static void ct_pixel(const ct_ctx *c, const ct_run *rows, const ct_run *cols, const int8_t *x_g,
                     int32_t oc0, int32_t nc, const uint32_t *base, uint32_t *acc, int8_t *y_px)
{
  const mt_out_stage out = {c->mult + oc0, c->shift + oc0, c->out_zp,
                            c->act_min,    c->act_max,     y_px + oc0};
  const mt_out_stage keep = {NULL, NULL, 0, 0, 0, NULL};
  const int8_t *w_c = c->w + (size_t)oc0 * c->k;
  const size_t cg = (size_t)c->cg, cin = (size_t)c->cin, w_in = (size_t)c->aw.size;
  const int32_t taps = rows->n * cols->n;
  const uint32_t *init = base;
  int32_t done = 0;
  if (taps == 0) { /* no input lands here: y = rq(bias) */
    mt_dot_rows_s8(x_g, w_c, c->k, 0, nc, base, acc, &out);
    return;
  }
  for (int32_t r = 0; r < rows->n; r++) {
    const size_t ky = (size_t)(rows->k0 + r * c->ah.step);
    const size_t iy = (size_t)(rows->i0 - r * c->ah.di);
    for (int32_t q = 0; q < cols->n; q++) {
      const size_t kx = (size_t)(cols->k0 + q * c->aw.step);
      const size_t ix = (size_t)(cols->i0 - q * c->aw.di);
      const int8_t *xr = x_g + (iy * w_in + ix) * cin;
      mt_dot_rows_s8(xr, w_c + (ky * (size_t)c->kw + kx) * cg, c->k, (uint32_t)cg, nc, init, acc,
                     ++done == taps ? &out : &keep);
      init = acc;
    }
  }
}

/* base[o] = bias + x_off * the sum of the weights of taps rows x cols, channels oc0 + o. */
static void ct_base(const ct_ctx *c, const ct_run *rows, const ct_run *cols, int32_t oc0,
                    int32_t nc, uint32_t *base)
{
  const int8_t *w_c = c->w + (size_t)oc0 * c->k;
  __builtin_memset(base, 0, (size_t)nc * sizeof base[0]);
  for (int32_t r = 0; r < rows->n; r++) {
    for (int32_t q = 0; q < cols->n; q++) {
      const size_t ky = (size_t)(rows->k0 + r * c->ah.step);
      const size_t kx = (size_t)(cols->k0 + q * c->aw.step);
      mt_wsum_rows_s8(w_c + (ky * (size_t)c->kw + kx) * (size_t)c->cg, c->k, (uint32_t)c->cg, nc,
                      base);
    }
  }
  for (int32_t o = 0; o < nc; o++) {
    base[o] = (uint32_t)c->bias[oc0 + o] + (uint32_t)c->x_off * base[o];
  }
}

static int ct_same(const ct_run *a, const ct_run *b)
{
  return a->n == b->n && (a->n == 0 || a->k0 == b->k0);
}

/* The taps of a phase's interior (its centre pixel), their weights re-laid for the channels
 * [oc, oc + ns) as rows of k_p = taps * Cg bytes in gather order, base for them, and the
 * gathered windows of up to MT_PX pixels waiting for one mt_dot_px_s8 call. */
typedef struct {
  ct_run rows, cols;
  int32_t oc, ns, np, oy, ox;
  uint32_t kp;
  uint32_t base[CT_CHUNK];
  int8_t w[CT_WP_MAX], col[CT_COL_MAX];
} ct_phase;

static void ct_relayout(const ct_ctx *c, ct_phase *ph)
{
  const int8_t *w_c = c->w + (size_t)ph->oc * c->k;
  int8_t *wp = ph->w;
  for (int32_t o = 0; o < ph->ns; o++, w_c += c->k) {
    for (int32_t r = 0; r < ph->rows.n; r++) {
      for (int32_t q = 0; q < ph->cols.n; q++, wp += c->cg) {
        const size_t ky = (size_t)(ph->rows.k0 + r * c->ah.step);
        const size_t kx = (size_t)(ph->cols.k0 + q * c->aw.step);
        mt_fill_s8(wp, w_c + (ky * (size_t)c->kw + kx) * (size_t)c->cg, (size_t)c->cg, 0);
      }
    }
  }
  ct_base(c, &ph->rows, &ph->cols, ph->oc, ph->ns, ph->base);
}

/* y of the gathered pixels (a run of one phase row, outputs stride_w apart). */
static void ct_flush(const ct_ctx *c, ct_phase *ph, int8_t *y_img)
{
  if (ph->np == 0) {
    return;
  }
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g;
  if (!MT_MVE && ph->np == 1) { /* x + px_stride is read: a copy of the window */
    mt_fill_s8(ph->col + ph->kp, ph->col, ph->kp, 0);
  }
  const mt_px_src src = {ph->col, ph->kp, ph->kp, ph->kp, 1, ph->np};
  const mt_out_stage out = {c->mult + ph->oc,
                            c->shift + ph->oc,
                            c->out_zp,
                            c->act_min,
                            c->act_max,
                            y_img + ((size_t)ph->oy * (size_t)c->aw.out + (size_t)ph->ox) * cout +
                                (size_t)ph->oc};
  mt_dot_px_s8(&src, ph->w, ph->ns, ph->base, &out, (size_t)c->aw.stride * cout);
  ph->np = 0;
}

/* Append the pixel whose taps read rows iy0, iy0 - di, ... and columns ix0, ix0 - di, ... to
 * the gathered windows; taps reading outside the input get in_zp (x + x_off == 0: nothing). */
static void ct_gather(const ct_ctx *c, ct_phase *ph, const int8_t *x_g, int64_t iy0, int64_t ix0,
                      int32_t oy, int32_t ox)
{
  int8_t *col = ph->col + (size_t)ph->np * ph->kp;
  for (int32_t r = 0; r < ph->rows.n; r++) {
    const int64_t iy = iy0 - (int64_t)r * c->ah.di;
    for (int32_t q = 0; q < ph->cols.n; q++, col += c->cg) {
      const int64_t ix = ix0 - (int64_t)q * c->aw.di;
      if (iy < 0 || iy >= c->ah.size || ix < 0 || ix >= c->aw.size) {
        mt_fill_s8(col, NULL, (size_t)c->cg, -c->x_off);
        continue;
      }
      const size_t px = (size_t)iy * (size_t)c->aw.size + (size_t)ix;
      mt_fill_s8(col, x_g + px * (size_t)c->cin, (size_t)c->cg, 0);
    }
  }
  if (ph->np++ == 0) {
    ph->oy = oy, ph->ox = ox;
  }
}

/* One phase (rows oy == ry, columns ox == rx mod stride) of channels [oc0, oc0 + nc): with its
 * windows short enough, every pixel through mt_dot_px_s8 on windows of all the phase's taps
 * gathered (those outside the input as in_zp), else tap by tap (ct_pixel). */
static void ct_phase_run(const ct_ctx *c, ct_phase *ph, const int8_t *x_g, int8_t *y_img,
                         int32_t ry, int32_t rx, int32_t oc0, int32_t nc, uint32_t *base,
                         uint32_t *acc)
{
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g, w_out = (size_t)c->aw.out;
  const int32_t sh = c->ah.stride, sw = c->aw.stride;
  int64_t iy0, ix0;
  ct_phase_taps(&c->ah, ry, &ph->rows, &iy0);
  ct_phase_taps(&c->aw, rx, &ph->cols, &ix0);
  ph->kp = (uint32_t)ph->rows.n * (uint32_t)ph->cols.n * (uint32_t)c->cg;
  const int px = ph->kp > 0 && ph->kp <= CT_COL_MAX / MT_PX;
  const int32_t per = px && CT_WP_MAX / (int32_t)ph->kp < nc ? CT_WP_MAX / (int32_t)ph->kp : nc;
  for (int32_t sub = 0; sub < nc; sub += per) {
    ct_run key_r = {0, -1, 0}, key_c = {0, -1, 0}; /* the taps base was computed for */
    ph->oc = oc0 + sub, ph->ns = nc - sub < per ? nc - sub : per, ph->np = 0;
    if (px) {
      ct_relayout(c, ph);
    }
    for (int32_t oy = ry, j = 0; oy < c->ah.out; oy += sh, j++) {
      ct_run rows, cols;
      ct_taps(&c->ah, oy, &rows);
      for (int32_t ox = rx, i = 0; ox < c->aw.out; ox += sw, i++) {
        if (px) { /* the phase's taps read one input further per pixel */
          ct_gather(c, ph, x_g, iy0 + j, ix0 + i, oy, ox);
          if (ph->np == MT_PX) {
            ct_flush(c, ph, y_img);
          }
          continue;
        }
        ct_taps(&c->aw, ox, &cols);
        if (!ct_same(&rows, &key_r) || !ct_same(&cols, &key_c)) {
          ct_base(c, &rows, &cols, ph->oc, ph->ns, base);
          key_r = rows, key_c = cols;
        }
        ct_pixel(c, &rows, &cols, x_g, ph->oc, ph->ns, base, acc,
                 y_img + ((size_t)oy * w_out + (size_t)ox) * cout);
      }
      ct_flush(c, ph, y_img);
    }
  }
}

/* Every output pixel of channels [oc0, oc0 + nc) of group g, phase by phase. */
static void ct_chunk(const ct_ctx *c, ct_phase *ph, int32_t g, int32_t oc0, int32_t nc,
                     uint32_t *base, uint32_t *acc)
{
  const size_t x_img = (size_t)c->ah.size * (size_t)c->aw.size * (size_t)c->cin;
  const size_t y_img = (size_t)c->ah.out * (size_t)c->aw.out * (size_t)c->groups * c->cout_g;
  for (int32_t n = 0; n < c->batch; n++) {
    const int8_t *x_g = c->x + (size_t)n * x_img + (size_t)g * (size_t)c->cg;
    for (int32_t ry = 0; ry < c->ah.stride && ry < c->ah.out; ry++) {
      for (int32_t rx = 0; rx < c->aw.stride && rx < c->aw.out; rx++) {
        ct_phase_run(c, ph, x_g, c->y + (size_t)n * y_img, ry, rx, oc0, nc, base, acc);
      }
    }
  }
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (output channels first)
// bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
mt_status mt_conv_transpose2d_s8(const mt_op_args *args)
{
  ct_ctx c;
  ct_phase ph;
  uint32_t base[CT_CHUNK], acc[CT_CHUNK];
  if (!ct_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  for (int32_t g = 0; g < c.groups; g++) {
    for (int32_t done = 0; done < c.cout_g; done += CT_CHUNK) {
      const int32_t nc = c.cout_g - done < CT_CHUNK ? c.cout_g - done : CT_CHUNK;
      ct_chunk(&c, &ph, g, g * c.cout_g + done, nc, base, acc);
    }
  }
  return MT_STATUS_OK;
}
