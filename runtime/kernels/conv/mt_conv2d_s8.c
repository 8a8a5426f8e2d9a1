/*
 * mt_conv2d_s8.c - grouped 2-D convolution, int8 NHWC in and out, per-channel requantization.
 *
 * Output channels go in chunks of up to CONV_CHUNK; per chunk, base[o] = bias[o] + x_off *
 * sum(w[o]) once (mt_kernel_mac.h: the dot loops sum raw x * w). Windows of up to CONV_WIN_MAX
 * bytes (groups == 1, dilation_w == 1, not 1x1) are gathered into KH * KW * Cin bytes in weight
 * order, the padding set to in_zp (whose x + x_off is 0), MT_PX pixels back to back, and
 * mt_dot_px_s8 runs them against each weight row together (acc = base for every window; pure
 * C reads windows inside the input in place instead). Otherwise, per pixel, each kernel row is
 * a run (else each tap, Cin/groups bytes) through mt_dot_rows_s8: full windows start from base;
 * partly in the padding (skipped, never read) from bias + x_off * sum of the in-bounds weights;
 * entirely in the padding from bias.
 */
#include "mt_conv_1x1.h"
#include "mt_kernel_add_stage.h"
#include "mt_kernel_mac.h"
#include "mt_kernel_mac_px.h"
#include "mt_kernels.h"
#include "mt_mac16.h" /* an int16 x: mt_conv2d_s16 */

#define CONV_CHUNK   MT_MAC_CHUNK /* output channels per pass */
#define CONV_COL_MAX 2560 /* bytes of gathered windows (on the stack): up to MT_PX of them */
#define CONV_WIN_MAX MT_CONV_WIN_MAX /* the largest window gathered (mt_kernel_add_stage.h) */

typedef struct mt_conv_ctx {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  mt_axis ah, aw;
  int32_t batch, cin, cg, cout_g, groups, kh, kw;
  int32_t x_off, out_zp, act_min, act_max;
  size_t k; /* weights per output channel: KH * KW * Cin/groups */
  int gather; /* gather each window into one run (see the top of the file) */
  const mt_add_stage *add; /* conv2d_add's residual add in the output stage, or NULL */
  int8_t *stage; /* with add: conv outputs of stage_px pixels wait here (mt_conv_gather.h) */
  int32_t stage_px;
} conv_ctx;

static int conv_shapes_ok(const mt_op_args *a)
{
  const mt_tensor *x = &a->in[MT_CONV2D_IN_X], *w = &a->in[MT_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_CONV2D_OUT_Y];
  const int32_t groups = a->attrs[MT_CONV2D_GROUPS];
  const uint32_t cout = w->rec->shape[0];
  if (!mt_tensor_ok(x, MT_DTYPE_INT8, 4) || !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, 4) || groups < 1 || mt_dim(x->rec->shape[3]) < 0 ||
      mt_dim(cout) < 0) {
    return 0;
  }
  return (uint64_t)w->rec->shape[3] * (uint32_t)groups == x->rec->shape[3] &&
         cout % (uint32_t)groups == 0 && y->rec->shape[0] == x->rec->shape[0] &&
         y->rec->shape[3] == cout && mt_vec_ok(&a->in[MT_CONV2D_IN_BIAS], cout) &&
         mt_vec_ok(&a->in[MT_CONV2D_IN_MULT], cout) && mt_vec_ok(&a->in[MT_CONV2D_IN_SHIFT], cout);
}

static int conv_init(conv_ctx *c, const mt_op_args *a, const mt_add_stage *add)
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
  c->add = add;
  c->stage = (int8_t *)a->scratch;
  c->stage_px = a->scratch == NULL || w->rec->shape[0] == 0
                    ? 0
                    : (int32_t)(a->scratch_size / w->rec->shape[0]);
  c->stage_px = MT_ADD_STAGED ? c->stage_px : 0;
  c->batch = mt_dim(x->rec->shape[0]);
  c->cin = (int32_t)x->rec->shape[3];
  c->cg = (int32_t)w->rec->shape[3];
  c->groups = at[MT_CONV2D_GROUPS];
  c->cout_g = (int32_t)w->rec->shape[0] / c->groups;
  c->kh = mt_dim(w->rec->shape[1]);
  c->kw = mt_dim(w->rec->shape[2]);
  c->x_off = mt_zp_ok(at[MT_CONV2D_IN_ZP]) ? -at[MT_CONV2D_IN_ZP] : 0;
  c->out_zp = at[MT_CONV2D_OUT_ZP];
  c->act_min = at[MT_CONV2D_ACT_MIN];
  c->act_max = at[MT_CONV2D_ACT_MAX];
  c->k = (size_t)c->kh * (size_t)c->kw * (size_t)c->cg;
  c->gather =
      c->groups == 1 && at[MT_CONV2D_DILATION_W] == 1 && c->k <= CONV_WIN_MAX && c->kh * c->kw > 1;
  return c->batch >= 0 &&
         mt_axis_init(&c->ah, x->rec->shape[1], c->kh, at[MT_CONV2D_STRIDE_H],
                      at[MT_CONV2D_DILATION_H], at[MT_CONV2D_PAD_TOP], at[MT_CONV2D_PAD_BOTTOM],
                      y->rec->shape[1]) &&
         mt_axis_init(&c->aw, x->rec->shape[2], c->kw, at[MT_CONV2D_STRIDE_W],
                      at[MT_CONV2D_DILATION_W], at[MT_CONV2D_PAD_LEFT], at[MT_CONV2D_PAD_RIGHT],
                      y->rec->shape[2]) &&
         mt_zp_ok(at[MT_CONV2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) &&
         mt_mac_scales_ok(c->mult, c->shift, w->rec->shape[0]) &&
         (int64_t)c->batch * c->ah.out * c->aw.out <= INT32_MAX; /* pixel loops count in 32 bits */
}

/* The taps of one output pixel that land inside the input: rows [ky0, ky1), cols [kx0, kx1). */
typedef struct {
  int32_t ky0, ky1, kx0, kx1;
} conv_win;

/* Over the window's in-bounds runs, for the chunk's nc output channels (weights w_c): with
 * init, acc[o] = init[o] + sum x * w (later runs add to acc), the last run stored by `out`;
 * with init NULL, acc[o] += sum w. x_g: the group's first input channel at tap (ky0, kx0);
 * w_k: that tap's offset in a weight row. */
static void conv_runs(const conv_ctx *c, const conv_win *v, const int8_t *x_g, const int8_t *w_c,
                      size_t w_k, int32_t nc, const uint32_t *init, uint32_t *acc,
                      const mt_out_stage *out)
{
  const int32_t cg = c->cg, taps = v->kx1 - v->kx0, rows = v->ky1 - v->ky0;
  const size_t x_row = (size_t)c->ah.dilation * (size_t)c->aw.size * (size_t)c->cin;
  const size_t x_tap = (size_t)c->aw.dilation * (size_t)c->cin;
  const size_t w_row = (size_t)c->kw * (size_t)cg;
  /* groups == 1, dilation_w == 1: a kernel row's taps are adjacent in x and w (one run) */
  const int contiguous = c->groups == 1 && c->aw.dilation == 1;
  const uint32_t run = (uint32_t)(contiguous ? taps * cg : cg);
  const int32_t n_runs = contiguous ? 1 : taps;
  const mt_out_stage keep = {NULL, NULL, 0, 0, 0, NULL, NULL};
  for (int32_t ky = 0; ky < rows; ky++) {
    for (int32_t r = 0; r < n_runs; r++) {
      const int8_t *wr = w_c + w_k + (size_t)ky * w_row + (size_t)r * (size_t)cg;
      if (init == NULL) {
        mt_wsum_rows_s8(wr, c->k, run, nc, acc);
        continue;
      }
      const int last = ky == rows - 1 && r == n_runs - 1;
      mt_dot_rows_s8(x_g + (size_t)ky * x_row + (size_t)r * x_tap, wr, c->k, run, nc, init, acc,
                     last ? out : &keep);
      init = acc;
    }
  }
}

/* The chunk's output channels [oc0, oc0 + nc) of one output pixel (group g); base[o] = bias +
 * x_off * sum(w) of channel oc0 + o; col: CONV_COL_MAX bytes; acc: nc accumulators. */
static void conv_pixel(const conv_ctx *c, const int8_t *x_img, int32_t oh, int32_t ow, int32_t g,
                       int32_t oc0, int32_t nc, const uint32_t *base, int8_t *col, uint32_t *acc,
                       int8_t *y_px)
{
  conv_win v;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &v.ky0, &v.ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &v.kx0, &v.kx1);
  const int8_t *w_c = c->w + (size_t)oc0 * c->k;
  const int empty = v.kx1 == v.kx0 || v.ky1 == v.ky0;
  const int full = v.ky0 == 0 && v.ky1 == c->kh && v.kx0 == 0 && v.kx1 == c->kw;
  const mt_out_stage out = {c->mult + oc0, c->shift + oc0, c->out_zp, c->act_min,
                            c->act_max,    y_px + oc0,     c->add};
  if (empty) { /* the window lies in the padding: y = rq(bias) */
    mt_dot_rows_s8(col, w_c, c->k, 0, nc, (const uint32_t *)c->bias + oc0, acc, &out);
  } else {
    const size_t px = (size_t)(iy + v.ky0 * c->ah.dilation) * (size_t)c->aw.size +
                      (size_t)(ix + v.kx0 * c->aw.dilation); /* the window's first tap */
    const int8_t *x_g = x_img + px * (size_t)c->cin + (size_t)g * (size_t)c->cg;
    const size_t w_k = ((size_t)v.ky0 * (size_t)c->kw + (size_t)v.kx0) * (size_t)c->cg;
    const uint32_t *init = base;
    if (!full) { /* bias + x_off * sum of the in-bounds weights */
      __builtin_memset(acc, 0, (size_t)nc * sizeof acc[0]);
      conv_runs(c, &v, x_g, w_c, w_k, nc, NULL, acc, &out);
      for (int32_t o = 0; o < nc; o++) {
        acc[o] = (uint32_t)c->bias[oc0 + o] + (uint32_t)c->x_off * acc[o];
      }
      init = acc;
    }
    conv_runs(c, &v, x_g, w_c, w_k, nc, init, acc, &out);
  }
}

/* base[o] = bias + x_off * sum(w) of output channels oc0 + o, o < nc. */
static void conv_base(const conv_ctx *c, int32_t oc0, int32_t nc, uint32_t *base)
{
  __builtin_memset(base, 0, (size_t)nc * sizeof base[0]);
  mt_wsum_rows_s8(c->w + (size_t)oc0 * c->k, c->k, (uint32_t)c->k, nc, base);
  for (int32_t o = 0; o < nc; o++) {
    base[o] = (uint32_t)c->bias[oc0 + o] + (uint32_t)c->x_off * base[o];
  }
}

#include "mt_conv_gather.h" /* conv_gathered: groups == 1, windows gathered */

mt_status mt_conv2d_stage_s8(const mt_op_args *args, const mt_add_stage *add)
{
  conv_ctx c;
  uint32_t base[CONV_CHUNK], acc[CONV_CHUNK];
  int8_t col[CONV_COL_MAX];
  if (mt_args_ok(args, MT_CONV2D_N_INPUTS, MT_CONV2D_N_OUTPUTS, MT_CONV2D_N_ATTRS) &&
      args->in[MT_CONV2D_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_conv2d_s16 != NULL ? mt_conv2d_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  if (!conv_init(&c, args, add)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (c.groups == 1 && c.kh == 1 && c.kw == 1 && c.ah.pad0 == 0 && c.aw.pad0 == 0 &&
      (int64_t)(c.ah.out - 1) * c.ah.stride < c.ah.size &&
      (int64_t)(c.aw.out - 1) * c.aw.stride < c.aw.size) { /* 1x1, no window in the padding */
    const mt_conv1x1 p = {c.x,      c.w,      c.bias,    c.mult,      c.shift,
                          c.y,      c.batch,  c.ah.size, c.aw.size,   c.cin,
                          c.cout_g, c.ah.out, c.aw.out,  c.ah.stride, c.aw.stride,
                          c.x_off,  c.out_zp, c.act_min, c.act_max,   c.add};
    if (conv1x1_run(&p)) {
      return MT_STATUS_OK;
    }
  }
  const size_t x_img = (size_t)c.ah.size * (size_t)c.aw.size * (size_t)c.cin;
  const size_t y_px = (size_t)c.groups * (size_t)c.cout_g;
  for (int32_t g = 0; g < c.groups; g++) {
    for (int32_t done = 0; done < c.cout_g; done += CONV_CHUNK) {
      const int32_t oc0 = g * c.cout_g + done;
      const int32_t nc = c.cout_g - done < CONV_CHUNK ? c.cout_g - done : CONV_CHUNK;
      conv_base(&c, oc0, nc, base);
      if (c.gather && c.add != NULL) {
        c.add->gathered(&c, oc0, nc, base, col);
        continue;
      }
      if (c.gather) {
        conv_gathered(&c, oc0, nc, base, col);
        continue;
      }
      int8_t *y = c.y;
      for (int32_t n = 0; n < c.batch; n++) {
        for (int32_t oh = 0; oh < c.ah.out; oh++) {
          for (int32_t ow = 0; ow < c.aw.out; ow++, y += y_px) {
            conv_pixel(&c, c.x + (size_t)n * x_img, oh, ow, g, oc0, nc, base, col, acc, y);
          }
        }
      }
    }
  }
  return MT_STATUS_OK;
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI)
// bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
mt_status mt_conv2d_s8(const mt_op_args *args)
{
  return mt_conv2d_stage_s8(args, NULL);
}
