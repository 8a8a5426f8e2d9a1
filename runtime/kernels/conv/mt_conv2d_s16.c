/*
 * mt_conv2d_s16.c - grouped 2-D convolution on an int16 x (a16w8, docs/numerics.md section 6):
 * int8 OHWI weights, an int64 bias within int48, zero points 0, 16-bit multipliers, int16 NHWC y.
 * mt_conv2d_s8 calls it for an int16 x.
 *
 *   acc[o] = bias[o] + sum over the window's in-bounds taps of x * w[o]    (int64 or int32)
 *   y[o]   = clamp(rq(acc[o], mult[o], shift[o]), act_min, act_max)
 *
 * The input zero point is 0, so padding contributes nothing. The output stage's form (32-bit
 * or 64-bit) is chosen once per call (mt_stage16). Each output pixel's window is one run of
 * KH * KW * Cin int16 in weight order: in place in x when it is one kernel row of in-bounds
 * taps (a 1x1, a conv1d; a 1x1 of stride 1 without padding runs all pixels as one row), else
 * gathered (groups == 1, dilation_w == 1, at most CONV16_COL elements; zeros in the padding;
 * 4 * CONV16_COL bytes of stack for two pixels). Pixels go in pairs along a row, every
 * channel over both windows (mt_mac16_channels2: on MVE each weight load feeds both).
 * Otherwise, per output pixel and MT_MAC16_NR output channels of a group, each in-bounds
 * kernel row is one run (groups == 1, dilation_w == 1: the row's taps are adjacent in x and w),
 * else each tap one run of Cin/groups elements; the padding is skipped, never read.
 */
#include "mt_mac16.h"

#define CONV16_COL 512 /* int16 elements of the largest gathered window */

typedef struct {
  const int16_t *x;
  const int8_t *w;
  int16_t *y;
  mt_stage16 st;
  mt_axis ah, aw;
  int32_t batch, cin, cg, cout_g, groups, kh, kw;
} conv16_ctx;

static int conv16_init(conv16_ctx *c, const mt_op_args *a)
{
  const int32_t *at = a->attrs;
  const mt_tensor *x = &a->in[MT_CONV2D_IN_X], *w = &a->in[MT_CONV2D_IN_WEIGHT];
  const mt_tensor *y = &a->out[MT_CONV2D_OUT_Y];
  const int32_t groups = at[MT_CONV2D_GROUPS];
  if (!mt_tensor_ok(x, MT_DTYPE_INT16, 4) || !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(y, MT_DTYPE_INT16, 4) || groups < 1 || mt_dim(x->rec->shape[3]) < 0 ||
      mt_dim(w->rec->shape[0]) < 0 || mt_dim(x->rec->shape[0]) < 0 ||
      (uint64_t)w->rec->shape[3] * (uint32_t)groups != x->rec->shape[3] ||
      w->rec->shape[0] % (uint32_t)groups != 0 || y->rec->shape[0] != x->rec->shape[0] ||
      y->rec->shape[3] != w->rec->shape[0] || at[MT_CONV2D_IN_ZP] != 0 ||
      !mt_mac16_ok(&a->in[MT_CONV2D_IN_BIAS], &a->in[MT_CONV2D_IN_MULT], &a->in[MT_CONV2D_IN_SHIFT],
                   w->rec->shape[0], at[MT_CONV2D_OUT_ZP], at[MT_CONV2D_ACT_MIN],
                   at[MT_CONV2D_ACT_MAX])) {
    return 0;
  }
  c->x = (const int16_t *)x->data;
  c->w = (const int8_t *)w->data;
  c->y = (int16_t *)y->data;
  c->batch = (int32_t)x->rec->shape[0];
  c->cin = (int32_t)x->rec->shape[3];
  c->cg = (int32_t)w->rec->shape[3];
  c->groups = groups;
  c->cout_g = (int32_t)w->rec->shape[0] / groups;
  c->kh = mt_dim(w->rec->shape[1]);
  c->kw = mt_dim(w->rec->shape[2]);
  const uint32_t k =
      w->rec->shape[1] * w->rec->shape[2] * w->rec->shape[3]; /* the weight's size fits */
  mt_stage16_init(&c->st, (const int64_t *)a->in[MT_CONV2D_IN_BIAS].data,
                  (const int32_t *)a->in[MT_CONV2D_IN_MULT].data,
                  (const int32_t *)a->in[MT_CONV2D_IN_SHIFT].data, at[MT_CONV2D_ACT_MIN],
                  at[MT_CONV2D_ACT_MAX], c->w, k, w->rec->shape[0], k,
                  (uint64_t)y->rec->shape[0] * y->rec->shape[1] * y->rec->shape[2] >= 8);
  return mt_axis_init(&c->ah, x->rec->shape[1], c->kh, at[MT_CONV2D_STRIDE_H],
                      at[MT_CONV2D_DILATION_H], at[MT_CONV2D_PAD_TOP], at[MT_CONV2D_PAD_BOTTOM],
                      y->rec->shape[1]) &&
         mt_axis_init(&c->aw, x->rec->shape[2], c->kw, at[MT_CONV2D_STRIDE_W],
                      at[MT_CONV2D_DILATION_W], at[MT_CONV2D_PAD_LEFT], at[MT_CONV2D_PAD_RIGHT],
                      y->rec->shape[2]) &&
         (int64_t)c->batch * c->ah.out * c->aw.out <= INT32_MAX;
}

/* Output channels [oc, oc + nr) of pixel (n, oh, ow): acc = bias + the in-bounds taps, then y. */
static int conv16_pixel(const conv16_ctx *c, int32_t n, int32_t oh, int32_t ow, int32_t g,
                        int32_t oc, int32_t nr, int16_t *y_px)
{
  int32_t ky0, ky1, kx0, kx1;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1);
  const size_t cin = (size_t)c->cin, cg = (size_t)c->cg, k = (size_t)c->kh * (size_t)c->kw * cg;
  const int contiguous = c->groups == 1 && c->aw.dilation == 1;
  const int32_t runs = contiguous ? (kx1 > kx0) : kx1 - kx0;
  const uint32_t len = (uint32_t)(contiguous ? (size_t)(kx1 - kx0) * cg : cg);
  const mt_stage16 *st = &c->st;
  int64_t acc[MT_MAC16_NR];
  int32_t acc32[MT_MAC16_NR];
  for (int32_t r = 0; r < nr; r++) {
    acc[r] = st->bias[oc + r];
    acc32[r] = (int32_t)st->bias[oc + r]; /* used in the fast form only */
  }
  for (int32_t ky = ky0; ky < ky1; ky++) {
    const size_t row =
        ((size_t)n * (size_t)c->ah.size + (size_t)(iy + ky * c->ah.dilation)) * (size_t)c->aw.size;
    for (int32_t t = 0; t < runs; t++) {
      const int32_t kx = kx0 + t;
      const size_t px = row + (size_t)(ix + kx * c->aw.dilation);
      const int8_t *w = c->w + (size_t)oc * k + ((size_t)ky * (size_t)c->kw + (size_t)kx) * cg;
      const int16_t *xr = c->x + px * cin + (size_t)g * cg;
      if (st->fast) {
        mt_dot16_rows32(xr, w, k, len, nr, acc32);
      } else {
        mt_dot16_rows(xr, w, k, len, nr, acc);
      }
    }
  }
  if (st->fast) {
    mt_out16_32_n(st, acc32, oc, nr, y_px);
    return 1;
  }
  return mt_out16_n(acc, nr, st->mult + oc, st->shift + oc, st->lo, st->hi, y_px + oc);
}

/* col = the window of pixel (n, oh, ow) in weight order (KH, KW, Cin), 0 in the padding. */
static void conv16_gather(const conv16_ctx *c, int32_t n, int32_t oh, int32_t ow, int16_t *col)
{
  int32_t ky0, ky1, kx0, kx1;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int32_t ix = mt_axis_taps(&c->aw, ow, &kx0, &kx1);
  const size_t cin = (size_t)c->cin, row = (size_t)c->kw * cin;
  if (ky1 - ky0 != c->kh || kx1 - kx0 != c->kw) { /* padding: zeros, an interior pixel has none */
    __builtin_memset(col, 0, (size_t)c->kh * row * sizeof col[0]);
  }
  for (int32_t ky = ky0; ky < ky1 && kx1 > kx0; ky++) {
    const size_t px =
        ((size_t)n * (size_t)c->ah.size + (size_t)(iy + ky * c->ah.dilation)) * (size_t)c->aw.size +
        (size_t)(ix + kx0);
    int16_t *d = col + (size_t)ky * row + (size_t)kx0 * cin;
    const int16_t *src = c->x + px * cin;
    const uint32_t len = (uint32_t)((size_t)(kx1 - kx0) * cin);
#if MT_MVE
    for (uint32_t k = 0; k < len; k += 8) { /* a short run: no library call */
      const mve_pred16_t p = vctp16q(len - k);
      vstrhq_p_s16(d + k, vldrhq_z_s16(src + k, p), p);
    }
#else /* !MT_MVE */
    __builtin_memcpy(d, src, len * sizeof col[0]);
#endif /* MT_MVE */
  }
}

/* The window of pixel (n, oh, ow) as one run of x when it is one (a kernel row of in-bounds
 * taps: `run`, the row's first tap at x_row, see conv16_row), else gathered into col when
 * `gather`, else NULL (the runs of conv16_pixel). */
static const int16_t *conv16_window(const conv16_ctx *c, int32_t n, int32_t oh, int32_t ow,
                                    const int16_t *x_row, int run, int gather, int16_t *col)
{
  const int32_t ix = ow * c->aw.stride - c->aw.pad0; /* |.| < 2^31: mt_axis_init */
  if (run && ix >= 0 && ix <= c->aw.size - c->kw) {
    return x_row + (size_t)ix * (size_t)c->cin;
  }
  if (!gather) {
    return NULL;
  }
  conv16_gather(c, n, oh, ow, col);
  return col;
}

/* Output row (n, oh) into y: pixels in pairs sharing each weight load (mt_mac16_channels2) where
 * both have a window, else one at a time. */
static int conv16_row(const conv16_ctx *c, int32_t n, int32_t oh, int gather, int16_t *col,
                      int16_t *y)
{
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g;
  const uint32_t k = (uint32_t)(c->kh * c->kw * c->cin);
  int32_t ky0, ky1;
  const int32_t iy = mt_axis_taps(&c->ah, oh, &ky0, &ky1);
  const int run = c->kh == 1 && ky1 - ky0 == 1 && c->groups == 1 && c->aw.dilation == 1;
  const int16_t *x_row = c->x + ((size_t)n * (size_t)c->ah.size + (size_t)(run ? iy : 0)) *
                                    (size_t)c->aw.size * (size_t)c->cin;
  for (int32_t ow = 0; ow < c->aw.out; ow++, y += cout) {
    const int16_t *wa = conv16_window(c, n, oh, ow, x_row, run, gather, col);
    const int16_t *wb = wa != NULL && ow + 1 < c->aw.out
                            ? conv16_window(c, n, oh, ow + 1, x_row, run, gather, col + CONV16_COL)
                            : NULL;
    if (wb != NULL) {
      if (!mt_mac16_channels2(&c->st, wa, wb, c->w, k, k, c->cout_g, y, y + cout)) {
        return 0;
      }
      ow++;
      y += cout;
    } else if (wa != NULL) {
      if (!mt_mac16_channels(&c->st, wa, c->w, k, k, c->cout_g, y)) {
        return 0;
      }
    } else {
      for (int32_t g = 0; g < c->groups; g++) {
        for (int32_t o = 0; o < c->cout_g; o += MT_MAC16_NR) {
          const int32_t nr = c->cout_g - o < MT_MAC16_NR ? c->cout_g - o : MT_MAC16_NR;
          if (!conv16_pixel(c, n, oh, ow, g, g * c->cout_g + o, nr, y)) {
            return 0; /* the loader bounds it: direct kernel calls */
          }
        }
      }
    }
  }
  return 1;
}

/* A 1x1 convolution of stride 1 without padding or groups: y's pixels are x's. */
static int conv16_pointwise(const conv16_ctx *c)
{
  return c->kh == 1 && c->kw == 1 && c->ah.stride == 1 && c->aw.stride == 1 && c->ah.pad0 == 0 &&
         c->aw.pad0 == 0 && c->ah.out == c->ah.size && c->aw.out == c->aw.size && c->groups == 1;
}

/* conv16_pointwise: every pixel of every image as one row, in pairs (mt_mac16_channels2). */
static int conv16_pixels(const conv16_ctx *c)
{
  const size_t cin = (size_t)c->cin, cout = (size_t)c->cout_g;
  const int64_t px = (int64_t)c->batch * c->ah.out * c->aw.out; /* <= INT32_MAX: conv16_init */
  for (int64_t p = 0; p < px; p += 2) {
    const int16_t *x = c->x + (size_t)p * cin;
    int16_t *y = c->y + (size_t)p * cout;
    if (!(p + 1 < px ? mt_mac16_channels2(&c->st, x, x + cin, c->w, cin, (uint32_t)cin, c->cout_g,
                                          y, y + cout)
                     : mt_mac16_channels(&c->st, x, c->w, cin, (uint32_t)cin, c->cout_g, y))) {
      return 0;
    }
  }
  return 1;
}

// x: (N, H, W, Cin) int16; weight: (Cout, KH, KW, Cin/groups) int8 (OHWI); bias: (Cout,)
// int64; mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int16
mt_status mt_conv2d_s16(const mt_op_args *args)
{
  conv16_ctx c;
  if (!conv16_init(&c, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const size_t cout = (size_t)c.groups * (size_t)c.cout_g;
  const int gather = c.groups == 1 && c.aw.dilation == 1 &&
                     (int64_t)c.kh * c.kw * c.cin <= CONV16_COL && c.kh * c.kw > 1;
  int16_t col[2 * CONV16_COL]; /* the gathered windows of two pixels */
  if (conv16_pointwise(&c)) { /* every pixel's window is its own Cin elements */
    return conv16_pixels(&c) ? MT_STATUS_OK : MT_STATUS_BAD_ARGUMENT;
  }
  for (int32_t n = 0; n < c.batch; n++) {
    for (int32_t oh = 0; oh < c.ah.out; oh++) {
      if (!conv16_row(&c, n, oh, gather, col,
                      c.y +
                          ((size_t)n * (size_t)c.ah.out + (size_t)oh) * (size_t)c.aw.out * cout)) {
        return MT_STATUS_BAD_ARGUMENT;
      }
    }
  }
  return MT_STATUS_OK;
}
