/*
 * mt_conv_transpose2d_s8.c - grouped transposed 2-D convolution, int8 NHWC in and out,
 * per-channel requantization.
 *
 * Output-stationary: input pixel (iy, ix) adds (x - in_zp) * w[o, ky, kx] to output pixel
 * (iy * stride_h - pad_top + ky * dilation_h, ix * stride_w - pad_left + kx * dilation_w), so
 * output row oy takes the taps ky with ky * dilation_h == oy + pad_top (mod stride_h) whose
 * input row lies inside the input: every `step` = stride / gcd(stride, dilation) taps, a run of
 * them (ct_taps). No zeros are inserted: each output pixel sums only the taps that land on it
 * (the true MAC count), each tap one run of Cin/groups input bytes against the chunk's weight
 * rows through mt_dot_rows_s8 (the MVE / DSP / C dot loops of mt_kernel_mac.h).
 *
 * Zero point: the dot loops sum raw x * w; the pixel starts from base = bias + x_off * (sum
 * of the weights of its taps). Output pixels are visited phase by phase (rows oy == r mod
 * stride_h, then columns likewise), so neighbours share their tap set away from the borders and
 * base is recomputed (mt_wsum_rows_s8) only when the set changes.
 */
#include "mt_kernel_mac.h"
#include "mt_kernels.h"

#define CT_CHUNK MT_MAC_CHUNK /* output channels per pass */

/* One spatial axis: output o takes taps k0, k0 + step, ... (n of them), reading input
 * positions i0, i0 - di, ... */
typedef struct {
  int32_t size, kernel, stride, dilation, pad0, out, step, di;
} ct_axis;

typedef struct {
  int32_t k0, n, i0;
} ct_run;

typedef struct {
  const int8_t *x, *w;
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  ct_axis ah, aw;
  int32_t batch, cin, cg, cout_g, groups, kh, kw;
  int32_t x_off, out_zp, act_min, act_max;
  size_t k; /* weights per output channel: KH * KW * Cin/groups */
} ct_ctx;

static int32_t ct_gcd(int32_t a, int32_t b)
{
  while (b != 0) {
    const int32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* 1 when the attributes are legal and `out` is the length they imply: (size - 1) * stride +
 * dilation * (kernel - 1) + 1 - pad0 - pad1, with pad0 >= 0 and pad1 > -max(stride, dilation)
 * (docs/numerics.md). */
static int ct_axis_init(ct_axis *ax, uint32_t size, int32_t kernel, int32_t stride,
                        int32_t dilation, int32_t pad0, int32_t pad1, uint32_t out)
{
  const int32_t most = stride > dilation ? stride : dilation;
  if (size < 1 || size > MT_DIM_MAX || kernel < 1 || kernel > MT_DIM_MAX || stride < 1 ||
      stride > MT_DIM_MAX || dilation < 1 || dilation > MT_DIM_MAX || pad0 < 0 ||
      pad0 > MT_DIM_MAX || pad1 <= -most || pad1 > MT_DIM_MAX) {
    return 0;
  }
  const int64_t len =
      ((int64_t)size - 1) * stride + (int64_t)dilation * (kernel - 1) + 1 - pad0 - pad1;
  if (len < 1 || len > MT_DIM_MAX || (uint64_t)len != out) {
    return 0;
  }
  const int32_t g = ct_gcd(stride, dilation);
  const ct_axis a = {(int32_t)size, kernel,       stride,     dilation,
                     pad0,          (int32_t)len, stride / g, dilation / g};
  *ax = a;
  return 1;
}

/* The taps of output position o that land inside the input (r->n == 0: none), in unsigned
 * 32-bit arithmetic (t = o + pad0 < 2^31; no 64-bit division, a library call on Cortex-M). */
static void ct_taps(const ct_axis *ax, int32_t o, ct_run *r)
{
  const uint32_t t = (uint32_t)o + (uint32_t)ax->pad0, s = (uint32_t)ax->stride;
  const uint32_t d = (uint32_t)ax->dilation, last = (uint32_t)ax->kernel - 1u;
  uint32_t k = 0, kd = 0; /* kd = k * d <= t: input i * stride == t - kd */
  r->n = 0;
  while ((t - kd) % s != 0) {
    if (++k >= (uint32_t)ax->step || k > last || d > t - kd) {
      return; /* no tap lands, or every landing one reads before the input */
    }
    kd += d;
  }
  uint32_t i = (t - kd) / s; /* decreases by di per landing tap */
  if (i >= (uint32_t)ax->size) { /* skip the taps reading past the end */
    const uint32_t skip = (i - (uint32_t)ax->size) / (uint32_t)ax->di + 1u;
    if (skip > (last - k) / (uint32_t)ax->step) {
      return;
    }
    k += skip * (uint32_t)ax->step;
    i -= skip * (uint32_t)ax->di; /* >= size - di: no wrap when it is negative is checked */
    if (i >= (uint32_t)ax->size) {
      return;
    }
  }
  const uint32_t by_k = (last - k) / (uint32_t)ax->step + 1u, by_i = i / (uint32_t)ax->di + 1u;
  r->k0 = (int32_t)k;
  r->i0 = (int32_t)i;
  r->n = (int32_t)(by_k < by_i ? by_k : by_i);
}

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

/* Every output pixel of channels [oc0, oc0 + nc) of group g, phase by phase. */
static void ct_chunk(const ct_ctx *c, int32_t g, int32_t oc0, int32_t nc, uint32_t *base,
                     uint32_t *acc)
{
  const size_t x_img = (size_t)c->ah.size * (size_t)c->aw.size * (size_t)c->cin;
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g, w_out = (size_t)c->aw.out;
  ct_run key_r = {0, -1, 0}, key_c = {0, -1, 0}; /* the taps base was computed for */
  for (int32_t n = 0; n < c->batch; n++) {
    const int8_t *x_g = c->x + (size_t)n * x_img + (size_t)g * (size_t)c->cg;
    int8_t *y_img = c->y + (size_t)n * (size_t)c->ah.out * w_out * cout;
    for (int32_t ry = 0; ry < c->ah.stride && ry < c->ah.out; ry++) {
      for (int32_t rx = 0; rx < c->aw.stride && rx < c->aw.out; rx++) {
        for (int32_t oy = ry; oy < c->ah.out; oy += c->ah.stride) {
          ct_run rows;
          ct_taps(&c->ah, oy, &rows);
          for (int32_t ox = rx; ox < c->aw.out; ox += c->aw.stride) {
            ct_run cols;
            ct_taps(&c->aw, ox, &cols);
            if (!ct_same(&rows, &key_r) || !ct_same(&cols, &key_c)) {
              ct_base(c, &rows, &cols, oc0, nc, base);
              key_r = rows, key_c = cols;
            }
            ct_pixel(c, &rows, &cols, x_g, oc0, nc, base, acc,
                     y_img + ((size_t)oy * w_out + (size_t)ox) * cout);
          }
        }
      }
    }
  }
}

// x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (output channels first)
// bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
mt_status mt_conv_transpose2d_s8(const mt_op_args *args)
{
  ct_ctx c;
  uint32_t base[CT_CHUNK], acc[CT_CHUNK];
  if (!ct_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  for (int32_t g = 0; g < c.groups; g++) {
    for (int32_t done = 0; done < c.cout_g; done += CT_CHUNK) {
      const int32_t nc = c.cout_g - done < CT_CHUNK ? c.cout_g - done : CT_CHUNK;
      ct_chunk(&c, g, g * c.cout_g + done, nc, base, &acc[0]);
    }
  }
  return MT_STATUS_OK;
}
