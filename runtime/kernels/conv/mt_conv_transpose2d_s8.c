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
 * channels) are re-laid once per call as rows of k_p = taps * Cg bytes in input order. With
 * windows of up to CT_COL_MAX / MT_PX bytes, MT_PX pixels of a phase row run against every
 * row at once (mt_dot_px_s8, the MVE / DSP / C loops of conv2d; mt_conv_transpose_px.h: the
 * tap rows above or below the input skipped, interior windows gathered as row runs, border
 * taps as in_zp). Longer windows go pixel by pixel (ct_pixel: the taps inside the input only,
 * a tap row of re-laid weights as one run when groups == 1 and di == 1, mt_dot_rows_s8; the
 * weights in place when a phase's do not fit CT_WP_MAX).
 *
 * Zero point: the dot loops sum raw x * w; a pixel starts from base = bias + x_off * (sum of
 * the weights of its taps), computed once per phase (per slice of tap rows, per tap set
 * pixel by pixel: when it changes).
 * Stack: 3.3 KiB (weights, windows, accumulators), as conv2d's gathered windows.
 */
#include "mt_conv_transpose_px.h"
#include "mt_kernels.h"

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
  const uint32_t cout = w->rec->shape[0];
  if (!mt_tensor_ok(x, MT_DTYPE_INT8, 4) || !mt_tensor_ok(w, MT_DTYPE_INT8, 4) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, 4) || groups < 1 || mt_dim(x->rec->shape[3]) < 0 ||
      mt_dim(cout) < 0 || mt_dim(w->rec->shape[3]) < 0 || mt_dim(x->rec->shape[0]) < 0 ||
      (uint64_t)w->rec->shape[3] * (uint32_t)groups != x->rec->shape[3] ||
      cout % (uint32_t)groups != 0 || y->rec->shape[0] != x->rec->shape[0] ||
      y->rec->shape[3] != cout || !mt_vec_ok(&a->in[MT_CONV_TRANSPOSE2D_IN_BIAS], cout) ||
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
  c->batch = (int32_t)x->rec->shape[0];
  c->cin = (int32_t)x->rec->shape[3];
  c->cg = (int32_t)w->rec->shape[3];
  c->groups = groups;
  c->cout_g = (int32_t)cout / groups;
  c->kh = mt_dim(w->rec->shape[1]);
  c->kw = mt_dim(w->rec->shape[2]);
  c->x_off = mt_zp_ok(at[MT_CONV_TRANSPOSE2D_IN_ZP]) ? -at[MT_CONV_TRANSPOSE2D_IN_ZP] : 0;
  c->out_zp = at[MT_CONV_TRANSPOSE2D_OUT_ZP];
  c->act_min = at[MT_CONV_TRANSPOSE2D_ACT_MIN];
  c->act_max = at[MT_CONV_TRANSPOSE2D_ACT_MAX];
  c->k = (size_t)c->kh * (size_t)c->kw * (size_t)c->cg;
  return c->kh > 0 && c->kw > 0 &&
         ct_axis_init(&c->ah, x->rec->shape[1], c->kh, at[MT_CONV_TRANSPOSE2D_STRIDE_H],
                      at[MT_CONV_TRANSPOSE2D_DILATION_H], at[MT_CONV_TRANSPOSE2D_PAD_TOP],
                      at[MT_CONV_TRANSPOSE2D_PAD_BOTTOM], y->rec->shape[1]) &&
         ct_axis_init(&c->aw, x->rec->shape[2], c->kw, at[MT_CONV_TRANSPOSE2D_STRIDE_W],
                      at[MT_CONV_TRANSPOSE2D_DILATION_W], at[MT_CONV_TRANSPOSE2D_PAD_LEFT],
                      at[MT_CONV_TRANSPOSE2D_PAD_RIGHT], y->rec->shape[2]) &&
         mt_zp_ok(at[MT_CONV_TRANSPOSE2D_IN_ZP]) && mt_zp_ok(c->out_zp) &&
         mt_act_ok(c->act_min, c->act_max) && mt_mac_scales_ok(c->mult, c->shift, cout) &&
         (int64_t)c->batch * c->ah.out * c->aw.out <= INT32_MAX;
}

/* Where the weights of a pixel's taps are: tap (r, q) of its landing taps (rows x cols, r, q
 * from 0) at w + r * dr + q * dq in output channel 0's row, channels `stride` bytes apart. */
typedef struct {
  const int8_t *w;
  size_t stride;
  ptrdiff_t dr, dq;
} ct_wmap;

/* Over the landing taps rows x cols of one output pixel, for nc output channels: with init,
 * acc[o] = init[o] + sum x * w (later runs add to acc), the last run stored by `out`; with
 * init NULL, acc[o] += sum w. The taps of a row form one run when they are adjacent and
 * ascending in x and in w (groups == 1, di == 1, the re-laid weights), else one run each. */
static void ct_runs(const ct_ctx *c, const ct_wmap *m, const ct_run *rows, const ct_run *cols,
                    const int8_t *x_g, int32_t nc, const uint32_t *init, uint32_t *acc,
                    const mt_out_stage *out)
{
  const mt_out_stage keep = {NULL, NULL, 0, 0, 0, NULL, NULL};
  const size_t cg = (size_t)c->cg, cin = (size_t)c->cin, w_in = (size_t)c->aw.size;
  const int one = c->groups == 1 && c->aw.di == 1 && m->dq == -(ptrdiff_t)cg;
  const int32_t n_runs = one ? 1 : cols->n;
  const uint32_t run = (uint32_t)(one ? (size_t)cols->n * cg : cg);
  for (int32_t r = 0; r < rows->n; r++) {
    const size_t iy = (size_t)(rows->i0 - r * c->ah.di);
    for (int32_t q = 0; q < n_runs; q++) {
      const int32_t qq = one ? cols->n - 1 : q; /* the run's first tap (lowest in x) */
      const size_t ix = (size_t)(cols->i0 - qq * c->aw.di);
      const int8_t *wr = m->w + r * m->dr + qq * m->dq;
      if (init == NULL) {
        mt_wsum_rows_s8(wr, m->stride, run, nc, acc);
        continue;
      }
      const int last = r == rows->n - 1 && q == n_runs - 1;
      mt_dot_rows_s8(x_g + (iy * w_in + ix) * cin, wr, m->stride, run, nc, init, acc,
                     last ? out : &keep);
      init = acc;
    }
  }
}

/* base[o] = bias + x_off * the sum of the weights of taps rows x cols, channels oc0 + o. */
static void ct_base(const ct_ctx *c, const ct_wmap *m, const ct_run *rows, const ct_run *cols,
                    int32_t oc0, int32_t nc, uint32_t *base)
{
  __builtin_memset(base, 0, (size_t)nc * sizeof base[0]);
  ct_runs(c, m, rows, cols, NULL, nc, NULL, base, NULL);
  for (int32_t o = 0; o < nc; o++) {
    base[o] = (uint32_t)c->bias[oc0 + o] + (uint32_t)c->x_off * base[o];
  }
}

static int ct_same(const ct_run *a, const ct_run *b)
{
  return a->n == b->n && (a->n == 0 || a->k0 == b->k0);
}

/* The weights of the landing taps rows x cols: in c->w, or re-laid in ph->w. */
static void ct_map(const ct_ctx *c, const ct_phase *ph, const ct_run *rows, const ct_run *cols,
                   ct_wmap *m)
{
  const ptrdiff_t cg = c->cg;
  m->w = c->w + (size_t)ph->oc * c->k, m->stride = c->k, m->dr = 0, m->dq = 0;
  if (rows->n == 0 || cols->n == 0) {
    return; /* no tap: the weights are not read */
  }
  if (!ph->relaid) {
    m->w += ((size_t)rows->k0 * (size_t)c->kw + (size_t)cols->k0) * (size_t)cg;
    m->dr = (ptrdiff_t)c->ah.step * c->kw * cg, m->dq = (ptrdiff_t)c->aw.step * cg;
    return;
  }
  const int32_t r0 = (rows->k0 - ph->rows.k0) / c->ah.step; /* phase tap of the first one */
  const int32_t q0 = (cols->k0 - ph->cols.k0) / c->aw.step; /* (border pixels only) */
  m->w =
      ph->w + ((size_t)(ph->rows.n - 1 - r0) * (size_t)ph->cols.n + (size_t)(ph->cols.n - 1 - q0)) *
                  (size_t)cg;
  m->stride = ph->kp, m->dr = -(ptrdiff_t)ph->cols.n * cg, m->dq = -cg;
}

/* The chunk's channels [ph->oc, + ph->ns) of output pixel y_px, landing taps rows x cols. */
static void ct_pixel(const ct_ctx *c, const ct_phase *ph, const ct_wmap *m, const ct_run *rows,
                     const ct_run *cols, const int8_t *x_g, const uint32_t *base, uint32_t *acc,
                     int8_t *y_px)
{
  const mt_out_stage out = {c->mult + ph->oc, c->shift + ph->oc, c->out_zp, c->act_min,
                            c->act_max,       y_px + ph->oc,     NULL};
  if (rows->n == 0 || cols->n == 0) { /* no input lands here: y = rq(bias) */
    mt_dot_rows_s8(x_g, m->w, m->stride, 0, ph->ns, base, acc, &out);
    return;
  }
  ct_runs(c, m, rows, cols, x_g, ph->ns, base, acc, &out);
}

/* One phase (rows oy == ry, columns ox == rx mod stride) of channels [oc0, oc0 + nc): windows
 * short enough, MT_PX pixels at a time through mt_dot_px_s8 (ct_row_px), else pixel by pixel
 * on their landing taps only (ct_pixel), both on weights re-laid once per phase when they fit. */
static void ct_phase_run(const ct_ctx *c, ct_phase *ph, const int8_t *x_g, int8_t *y_img,
                         int32_t ry, int32_t rx, int32_t oc0, int32_t nc, uint32_t *base,
                         uint32_t *acc)
{
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g, w_out = (size_t)c->aw.out;
  int64_t iy0, ix0;
  ct_phase_taps(&c->ah, ry, &ph->rows, &iy0);
  ct_phase_taps(&c->aw, rx, &ph->cols, &ix0);
  ph->kp = (uint32_t)ph->rows.n * (uint32_t)ph->cols.n * (uint32_t)c->cg;
  ph->relaid = ph->kp > 0 && ph->kp <= CT_WP_MAX;
  const int px = ph->relaid && ph->kp <= CT_COL_MAX / MT_PX;
  const int32_t per =
      ph->relaid && CT_WP_MAX / (int32_t)ph->kp < nc ? CT_WP_MAX / (int32_t)ph->kp : nc;
  const int32_t n = (c->aw.out - rx - 1) / c->aw.stride + 1; /* pixels per phase row */
  const int64_t back_h = (int64_t)(ph->rows.n - 1) * c->ah.di; /* first to last tap, in x */
  const int64_t back_w = (int64_t)(ph->cols.n - 1) * c->aw.di, ix = ix0 - back_w;
  const int32_t lo = -ix < 0 ? 0 : -ix < n ? (int32_t)-ix : n; /* columns inside: [lo, hi) */
  const int64_t end = c->aw.size - ix0;
  const int32_t hi = end < lo ? lo : end < n ? (int32_t)end : n;
  for (int32_t sub = 0; sub < nc; sub += per) {
    ct_run key_r = {0, -1, 0}, key_c = {0, -1, 0}; /* the taps base was computed for */
    ph->oc = oc0 + sub, ph->ns = nc - sub < per ? nc - sub : per, ph->np = 0;
    if (ph->relaid) {
      ct_relayout(c, ph);
    }
    for (int32_t oy = ry, j = 0; oy < c->ah.out; oy += c->ah.stride, j++) {
      if (px) { /* the phase's taps read one input further per pixel */
        ct_row_px(c, ph, x_g, y_img, oy, rx, n, lo, hi, iy0 + j - back_h, ix, base);
        continue;
      }
      ct_run rows, cols;
      ct_wmap m;
      ct_taps(&c->ah, oy, &rows);
      for (int32_t ox = rx; ox < c->aw.out; ox += c->aw.stride) {
        ct_taps(&c->aw, ox, &cols);
        ct_map(c, ph, &rows, &cols, &m);
        if (!ct_same(&rows, &key_r) || !ct_same(&cols, &key_c)) {
          ct_base(c, &m, &rows, &cols, ph->oc, ph->ns, base);
          key_r = rows, key_c = cols;
        }
        ct_pixel(c, ph, &m, &rows, &cols, x_g, base, acc,
                 y_img + ((size_t)oy * w_out + (size_t)ox) * cout);
      }
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
