/*
 * mt_conv_gather.h - the gathered windows of mt_conv2d_s8 (groups == 1, dilation_w == 1, windows
 * of up to CONV_WIN_MAX bytes, not 1x1; see the top of mt_conv2d_s8.c): up to MT_PX output pixels
 * per mt_dot_px_s8 call, each pixel once; conv2d_add's residual added in spans of staged
 * pixels or in the output stage (its own instance of the loop, mt_conv_gathered_add).
 * Included by mt_conv2d_s8.c after conv_ctx and conv_win.
 */
#ifndef MT_CONV_GATHER_H
#define MT_CONV_GATHER_H

#include "mt_kernel_mac_px.h"

/* col = the whole window at (iy, ix) as KH * KW * Cin bytes in weight order, padding = in_zp. */
static void conv_gather(const conv_ctx *c, const conv_win *v, const int8_t *x_img, int32_t iy,
                        int32_t ix, int8_t *col)
{
  const size_t cin = (size_t)c->cin, row = (size_t)c->kw * cin;
  const size_t pre = (size_t)v->kx0 * cin, mid = (size_t)(v->kx1 - v->kx0) * cin;
  for (int32_t ky = 0; ky < c->kh; ky++, col += row) {
    if (ky < v->ky0 || ky >= v->ky1) {
      mt_fill_s8(col, NULL, row, -c->x_off);
      continue;
    }
    const size_t px =
        (size_t)(iy + ky * c->ah.dilation) * (size_t)c->aw.size + (size_t)(ix + v->kx0);
    const int8_t *xr = x_img + px * cin;
    mt_fill_s8(col, NULL, pre, -c->x_off);
    mt_fill_s8(col + pre, xr, mid, 0);
    mt_fill_s8(col + pre + mid, NULL, row - pre - mid, -c->x_off);
  }
}

/* 1 when the window of output pixel (oh, ow) lies inside the input (dilation_w == 1). */
static MT_ALWAYS_INLINE int conv_inside(const conv_ctx *c, int32_t oh, int32_t ow)
{
  const int32_t iy = oh * c->ah.stride - c->ah.pad0, ix = ow * c->aw.stride - c->aw.pad0;
  return iy >= 0 && iy + (int64_t)(c->kh - 1) * c->ah.dilation < c->ah.size && ix >= 0 &&
         ix + c->kw <= c->aw.size;
}

/* conv2d_add: y = add(stage, skip) over output pixels [q0, q1) (all channels), the stage holding
 * their conv outputs: add's own same-shape loop. */
static void conv_add_span(const conv_ctx *c, int32_t q0, int32_t q1)
{
  int8_t *y = c->y + (size_t)q0 * (size_t)c->cout_g;
  c->add->same(c->stage, mt_add_skip(c->add, y), y, (uint32_t)(q1 - q0) * (uint32_t)c->cout_g,
               c->add->at);
}

/* groups == 1, windows gathered: up to MT_PX output pixels (NHWC order, across rows and
 * images) per mt_dot_px_s8 call, their windows back to back in col. Pure C reads the windows
 * of a group on one output row and inside the input in place (kernel rows as runs).
 * conv2d_add: with `staged` (every channel in this chunk, a stage of at least `per` pixels),
 * spans of whole pixels go to the stage, each then added to skip by add's own loop (fewer
 * instructions per element); otherwise the output stage adds the residual. */
static MT_ALWAYS_INLINE void conv_gathered_body(const conv_ctx *c, int32_t oc0, int32_t nc,
                                                const uint32_t *base, int8_t *col, int with_add)
{
  const size_t cin = (size_t)c->cin, w_in = (size_t)c->aw.size, run = (size_t)c->kw * cin;
  const size_t x_img = (size_t)c->ah.size * w_in * cin, cout = (size_t)c->cout_g, k = c->k;
  const size_t x_row = (size_t)c->ah.dilation * w_in * cin;
  const int32_t per = CONV_COL_MAX / (int32_t)k < MT_PX ? CONV_COL_MAX / (int32_t)k : MT_PX;
  const int32_t total = c->batch * c->ah.out * c->aw.out; /* < 2^31: checked at entry */
  const int staged = with_add && c->add != NULL && nc == c->cout_g && c->stage_px >= per;
  const int32_t span = staged ? c->stage_px / per * per : total; /* pixels per span */
  const mt_add_stage *in_stage = with_add && !staged ? c->add : NULL; /* add in the out stage */
  mt_out_stage out = {c->mult + oc0, c->shift + oc0, c->out_zp, c->act_min,
                      c->act_max,    NULL,           in_stage};
  int8_t *y = staged ? c->stage : c->y + (size_t)oc0; /* where the span's first pixel goes */
  int32_t n = 0, oh = 0, ow = 0, q0 = 0, end = span < total ? span : total; /* span [q0, end) */
  for (int32_t q = 0; q < total; q += per) {
    if (with_add && q == end) { /* the staged span [q0, end) is complete: add it to skip */
      conv_add_span(c, q0, end);
      q0 = end, end = total - end < span ? total : end + span;
    }
    mt_px_src src = {col, k, k, (uint32_t)k, 1, end - q < per ? end - q : per, k};
    const int direct = !MT_MVE && !MT_DSP && run >= 16 && ow + src.np <= c->aw.out &&
                       conv_inside(c, oh, ow) && conv_inside(c, oh, ow + src.np - 1);
    for (int32_t p = 0; p < src.np; p++) {
      const int32_t iy = oh * c->ah.stride - c->ah.pad0, ix = ow * c->aw.stride - c->aw.pad0;
      const int inside = (direct && p == 0) || (!direct && conv_inside(c, oh, ow));
      const int8_t *xr = c->x + (size_t)n * x_img;
      xr += inside ? ((size_t)iy * w_in + (size_t)ix) * cin : 0;
      if (direct && p == 0) {
        const mt_px_src d = {
            xr, src.np > 1 ? (size_t)c->aw.stride * cin : 0, x_row, (uint32_t)run, c->kh, src.np,
            k};
        src = d;
      } else if (inside) { /* KH copies */
        for (int32_t ky = 0; ky < c->kh; ky++, xr += x_row) {
          mt_fill_s8(col + (size_t)p * k + (size_t)ky * run, xr, run, 0);
        }
      } else if (!direct) {
        conv_win v;
        mt_axis_taps(&c->ah, oh, &v.ky0, &v.ky1);
        mt_axis_taps(&c->aw, ow, &v.kx0, &v.kx1);
        conv_gather(c, &v, c->x + (size_t)n * x_img, iy, ix, col + (size_t)p * k);
      }
      if (++ow == c->aw.out) {
        ow = 0;
        oh = oh + 1 == c->ah.out ? 0 : oh + 1;
        n += oh == 0;
      }
    }
    if (!MT_MVE && !direct && src.np == 1) { /* x + px_stride is read: a copy of the window */
      mt_fill_s8(col + k, col, k, 0);
    }
    out.y = y + (size_t)(q - q0) * cout;
    if (with_add && out.add != NULL) {
      mt_dot_px_add_s8(&src, c->w + (size_t)oc0 * k, nc, base, &out, cout);
    } else {
      mt_dot_px_s8(&src, c->w + (size_t)oc0 * k, nc, base, &out, cout);
    }
  }
  if (staged) {
    conv_add_span(c, q0, end);
  }
}

/* conv_gathered_body of plain conv2d (c->add NULL): no span bookkeeping in its loop. */
static void conv_gathered(const conv_ctx *c, int32_t oc0, int32_t nc, const uint32_t *base,
                          int8_t *col)
{
  conv_gathered_body(c, oc0, nc, base, col, 0);
}

/* conv_gathered_body of conv2d_add (c->add set): reached only through mt_add_stage.gathered,
 * which mt_conv2d_add_s8 sets, so a plain conv2d build links neither it nor the add's
 * output stage (mt_dot_px_add_s8). */
void mt_conv_gathered_add(const struct mt_conv_ctx *c, int32_t oc0, int32_t nc,
                          const uint32_t *base, int8_t *col)
{
  conv_gathered_body(c, oc0, nc, base, col, 1);
}

#endif /* MT_CONV_GATHER_H */
