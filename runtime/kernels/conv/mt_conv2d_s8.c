/*
 * mt_conv2d_s8.c - grouped 2-D convolution, int8 NHWC in and out, per-channel requantization.
 *
 * Per output pixel the taps that land inside the input are found once (padding contributes 0,
 * so it is skipped, never read); then output channels, four at a time, accumulate
 * bias + sum (x - in_zp) * w with the input-channel loop innermost (each x load feeds four
 * MACs). With groups == 1 and dilation_w == 1 the taps of one kernel row are adjacent in x and
 * in w, so the whole row is one run of (taps * Cin) terms; a 1x1 convolution is one run of Cin.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

typedef struct {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  mt_axis ah, aw;
  int32_t batch, cin, cg, cout_g, groups, kh, kw;
  int32_t x_off, out_zp, act_min, act_max;
} conv_ctx;

static int conv_shapes_ok(const mt_op_args *a)
{
  const mt_tensor *x = &a->in[MT_CONV2D_IN_X], *w = &a->in[MT_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_CONV2D_OUT_Y];
  const int32_t groups = a->attrs[MT_CONV2D_GROUPS];
  const uint32_t cout = w->shape[0];
  if (!mt_tensor_ok(x, MT_DTYPE_INT8, 4) || !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, 4) || groups < 1 || mt_dim(x->shape[3]) < 0 ||
      mt_dim(cout) < 0) {
    return 0;
  }
  return (uint64_t)w->shape[3] * (uint32_t)groups == x->shape[3] &&
         cout % (uint32_t)groups == 0 && y->shape[0] == x->shape[0] && y->shape[3] == cout &&
         mt_vec_ok(&a->in[MT_CONV2D_IN_BIAS], cout) &&
         mt_vec_ok(&a->in[MT_CONV2D_IN_MULT], cout) &&
         mt_vec_ok(&a->in[MT_CONV2D_IN_SHIFT], cout);
}

static int conv_init(conv_ctx *c, const mt_op_args *a)
{
  if (!mt_args_ok(a, MT_CONV2D_N_INPUTS, MT_CONV2D_N_OUTPUTS, MT_CONV2D_N_ATTRS) ||
      !conv_shapes_ok(a)) {
    return 0;
  }
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_CONV2D_IN_X], *w = &a->in[MT_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_CONV2D_OUT_Y];
  c->x = (const int8_t *)x->data;
  c->w = (const int8_t *)w->data;
  c->bias = (const int32_t *)a->in[MT_CONV2D_IN_BIAS].data;
  c->mult = (const int32_t *)a->in[MT_CONV2D_IN_MULT].data;
  c->shift = (const int32_t *)a->in[MT_CONV2D_IN_SHIFT].data;
  c->y = (int8_t *)y->data;
  c->batch = mt_dim(x->shape[0]);
  c->cin = (int32_t)x->shape[3];
  c->cg = (int32_t)w->shape[3];
  c->groups = at[MT_CONV2D_GROUPS];
  c->cout_g = (int32_t)w->shape[0] / c->groups;
  c->kh = mt_dim(w->shape[1]);
  c->kw = mt_dim(w->shape[2]);
  c->x_off = mt_zp_ok(at[MT_CONV2D_IN_ZP]) ? -at[MT_CONV2D_IN_ZP] : 0;
  c->out_zp = at[MT_CONV2D_OUT_ZP];
  c->act_min = at[MT_CONV2D_ACT_MIN];
  c->act_max = at[MT_CONV2D_ACT_MAX];
  return c->batch >= 0 &&
         mt_axis_init(&c->ah, x->shape[1], c->kh, at[MT_CONV2D_STRIDE_H],
                      at[MT_CONV2D_DILATION_H], at[MT_CONV2D_PAD_TOP], at[MT_CONV2D_PAD_BOTTOM],
                      y->shape[1]) &&
         mt_axis_init(&c->aw, x->shape[2], c->kw, at[MT_CONV2D_STRIDE_W],
                      at[MT_CONV2D_DILATION_W], at[MT_CONV2D_PAD_LEFT], at[MT_CONV2D_PAD_RIGHT],
                      y->shape[2]) &&
         mt_zp_ok(at[MT_CONV2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) && mt_scales_ok(c->mult, c->shift, w->shape[0]);
}

/* The taps of one output pixel that land inside the input: rows [ky0, ky1), cols [kx0, kx1). */
typedef struct {
  int32_t ky0, ky1, kx0, kx1;
} conv_win;

/* acc[j] += window sum of output channel j (nb = 4 channels, or 1), whose weights start at w_k
 * (tap (ky0, kx0)); x_g is the group's first input channel at tap (ky0, kx0). */
static void conv_sums(const conv_ctx *c, const conv_win *v, const int8_t *x_g, const int8_t *w_k,
                      int32_t nb, uint32_t acc[4])
{
  const int32_t cg = c->cg, taps = v->kx1 - v->kx0;
  const size_t x_row = (size_t)c->ah.dilation * (size_t)c->aw.size * (size_t)c->cin;
  const size_t x_tap = (size_t)c->aw.dilation * (size_t)c->cin;
  const size_t w_row = (size_t)c->kw * (size_t)cg, w_oc = (size_t)c->kh * w_row;
  /* groups == 1, dilation_w == 1: a kernel row's taps are adjacent in x and w (one run) */
  const int contiguous = c->groups == 1 && c->aw.dilation == 1;
  const uint32_t run = (uint32_t)(contiguous ? taps * cg : cg);
  const int32_t n_runs = contiguous ? 1 : taps;
  for (int32_t ky = 0; ky < v->ky1 - v->ky0; ky++) {
    for (int32_t r = 0; r < n_runs; r++) {
      const int8_t *xr = x_g + (size_t)ky * x_row + (size_t)r * x_tap;
      const int8_t *wr = w_k + (size_t)ky * w_row + (size_t)r * (size_t)cg;
      if (nb == 4) {
        mt_dot4_s8(xr, wr, w_oc, run, c->x_off, acc);
      } else {
        acc[0] += mt_dot_s8(xr, wr, run, c->x_off);
      }
    }
  }
}

/* One output pixel: y_px[oc] for every output channel, four channels at a time. */
static void conv_pixel(const conv_ctx *c, const int8_t *x_img, int32_t oh, int32_t ow,
                       int8_t *y_px)
{
  conv_win v;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &v.ky0, &v.ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &v.kx0, &v.kx1);
  const size_t w_oc = (size_t)c->kh * (size_t)c->kw * (size_t)c->cg;
  size_t x0 = 0, w0 = 0; /* offsets of tap (ky0, kx0) in the image and in one channel's weights */
  if (v.kx1 == v.kx0 || v.ky1 == v.ky0) { /* the window lies in the padding: y = rq(bias) */
    v.ky1 = v.ky0;
  } else {
    x0 = ((size_t)(iy + v.ky0 * c->ah.dilation) * (size_t)c->aw.size +
          (size_t)(ix + v.kx0 * c->aw.dilation)) * (size_t)c->cin;
    w0 = ((size_t)v.ky0 * (size_t)c->kw + (size_t)v.kx0) * (size_t)c->cg;
  }
  int32_t oc = 0;
  for (int32_t g = 0; g < c->groups; g++) {
    const int8_t *x_g = x_img + x0 + (size_t)g * (size_t)c->cg;
    for (int32_t left = c->cout_g; left > 0;) {
      const int32_t nb = left >= 4 ? 4 : 1;
      uint32_t acc[4];
      for (int32_t b = 0; b < nb; b++) {
        acc[b] = (uint32_t)c->bias[oc + b];
      }
      conv_sums(c, &v, x_g, c->w + (size_t)oc * w_oc + w0, nb, acc);
      for (int32_t b = 0; b < nb; b++, oc++) {
        y_px[oc] = mt_requantize(mt_wrap_s32(acc[b]), c->mult[oc], c->shift[oc], c->out_zp,
                                 c->act_min, c->act_max);
      }
      left -= nb;
    }
  }
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI)
// bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
mt_status mt_conv2d_s8(const mt_op_args *args)
{
  conv_ctx c;
  if (!conv_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t x_img = (size_t)c.ah.size * (size_t)c.aw.size * (size_t)c.cin;
  const size_t y_px = (size_t)c.groups * (size_t)c.cout_g;
  int8_t *y = c.y;
  for (int32_t n = 0; n < c.batch; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++) {
      for (int32_t ow = 0; ow < c.aw.out; ow++, y += y_px) {
        conv_pixel(&c, c.x + (size_t)n * x_img, oh, ow, y);
      }
    }
  }
  return MT_STATUS_OK;
}
