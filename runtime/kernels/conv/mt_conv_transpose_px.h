/*
 * mt_conv_transpose_px.h - conv_transpose2d's gathered path: the pixels of one phase, MT_PX at a
 * time through conv2d's dot loops (mt_dot_px_s8). Included by mt_conv_transpose2d_s8.c only.
 *
 * A phase's weights are re-laid once per call (per chunk of output channels) as rows of k_p =
 * taps * Cg bytes in input order: tap rows, then the taps of a row, ascending in x (the phase's
 * taps read the input backwards, i0, i0 - di, ...). So with groups == 1 and di_w == 1 a tap row
 * of a window is one run of the input, and the windows of consecutive pixels of a phase row are
 * Cin bytes apart. Per phase row:
 *   - the tap rows inside the input [r_lo, r_hi) are the rows of every window (the others add
 *     nothing), their weights a slice of each re-laid row (w_stride k_p) and their base sums
 *     computed when the slice changes: no MACs on the taps above or below the image;
 *   - pixels whose taps all lie inside the input in x gather r_hi - r_lo row copies;
 *   - the others (at the left and right borders) fill the window with in_zp (x + x_off == 0)
 *     and copy the taps inside the input.
 */
#ifndef MT_CONV_TRANSPOSE_PX_H
#define MT_CONV_TRANSPOSE_PX_H

#include "mt_conv_transpose_axis.h"
#include "mt_kernel_mac.h"
#include "mt_kernel_mac_px.h"

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

/* A phase's taps (rows x cols), their weights re-laid for the channels [oc, oc + ns), base for
 * all of them, and the windows of up to MT_PX pixels of one phase row (k_p bytes apart; tap
 * rows [w_lo, w_hi) of the phase, their base bs) waiting for one mt_dot_px_s8 call. */
typedef struct {
  ct_run rows, cols;
  int32_t oc, ns, np, oy, ox, relaid, w_lo, w_hi, b_lo, b_hi;
  uint32_t kp;
  const uint32_t *bs;
  uint32_t base[CT_CHUNK];
  int8_t w[CT_WP_MAX], col[CT_COL_MAX];
} ct_phase;

/* base[o] = bias + x_off * the sum of the n bytes at w of re-laid row o. */
static void ct_wbase(const ct_ctx *c, const ct_phase *ph, const int8_t *w, uint32_t n,
                     uint32_t *base)
{
  __builtin_memset(base, 0, (size_t)ph->ns * sizeof base[0]);
  mt_wsum_rows_s8(w, ph->kp, n, ph->ns, base);
  for (int32_t o = 0; o < ph->ns; o++) {
    base[o] = (uint32_t)c->bias[ph->oc + o] + (uint32_t)c->x_off * base[o];
  }
}

static void ct_relayout(const ct_ctx *c, ct_phase *ph)
{
  const ptrdiff_t cg = c->cg, dq = (ptrdiff_t)c->aw.step * cg;
  const ptrdiff_t dr = (ptrdiff_t)c->ah.step * c->kw * cg;
  const ptrdiff_t last = ((ptrdiff_t)(ph->rows.k0 + (ph->rows.n - 1) * c->ah.step) * c->kw +
                          ph->cols.k0 + (ph->cols.n - 1) * c->aw.step) *
                         cg; /* its first tap */
  const int8_t *w_c = c->w + (size_t)ph->oc * c->k;
  int8_t *wp = ph->w;
  for (int32_t o = 0; o < ph->ns; o++, w_c += c->k) {
    for (ptrdiff_t r = 0, row = last; r < ph->rows.n; r++, row -= dr) {
      for (ptrdiff_t q = 0, tap = row; q < ph->cols.n; q++, tap -= dq, wp += cg) {
        mt_fill_s8(wp, w_c + tap, (size_t)cg, 0);
      }
    }
  }
  ct_wbase(c, ph, ph->w, ph->kp, ph->base);
  ph->b_lo = ph->b_hi = -1; /* the slice base of the caller's buffer is stale */
}

/* y of the gathered pixels (a run of one phase row, outputs stride_w apart). */
static void ct_flush(const ct_ctx *c, ct_phase *ph, int8_t *y_img)
{
  if (ph->np == 0) {
    return;
  }
  const size_t cout = (size_t)c->groups * (size_t)c->cout_g;
  const uint32_t run = (uint32_t)ph->cols.n * (uint32_t)c->cg;
  const uint32_t k = (uint32_t)(ph->w_hi - ph->w_lo) * run;
  if (!MT_MVE && ph->np == 1) { /* x + px_stride is read: a copy of the window */
    mt_fill_s8(ph->col + ph->kp, ph->col, k, 0);
  }
  const mt_px_src src = {ph->col, ph->kp, ph->kp, k, 1, ph->np, ph->kp};
  const mt_out_stage out = {c->mult + ph->oc,
                            c->shift + ph->oc,
                            c->out_zp,
                            c->act_min,
                            c->act_max,
                            y_img + ((size_t)ph->oy * (size_t)c->aw.out + (size_t)ph->ox) * cout +
                                (size_t)ph->oc,
                            NULL};
  mt_dot_px_s8(&src, ph->w + (size_t)ph->w_lo * run, ph->ns, ph->bs, &out,
               (size_t)c->aw.stride * cout);
  ph->np = 0;
}

/* Append the window of the pixel whose taps start at input column ix (tap rows [w_lo, w_hi),
 * those in [r_lo, r_hi) inside the input, row r_lo at x_r): in_zp, then the taps inside the
 * input, as runs when groups == 1 and di == 1 (nl taps before the input, nr after it). */
static MT_NOINLINE void ct_gather(const ct_ctx *c, ct_phase *ph, const int8_t *x_r, int32_t r_lo,
                                  int32_t r_hi, int64_t ix)
{
  const size_t cg = (size_t)c->cg, cin = (size_t)c->cin, run = (size_t)ph->cols.n * cg;
  const size_t x_step = (size_t)c->ah.di * (size_t)c->aw.size * cin;
  const int64_t cn = ph->cols.n, after = ix + cn - c->aw.size;
  const int64_t nl = ix >= 0 ? 0 : -ix < cn ? -ix : cn;
  const int64_t nr = after <= 0 ? 0 : after < cn - nl ? after : cn - nl;
  const size_t pre = (size_t)nl * cg, mid = run - pre - (size_t)nr * cg;
  const int row_run = c->groups == 1 && c->aw.di == 1 && mid > 0;
  int8_t *col = ph->col + (size_t)ph->np++ * ph->kp;
  mt_fill_s8(col, NULL, (size_t)(ph->w_hi - ph->w_lo) * run, -c->x_off);
  for (int32_t r = r_lo; r < r_hi; r++, x_r += x_step) {
    int8_t *cr = col + (size_t)(r - ph->w_lo) * run;
    if (row_run) {
      mt_fill_s8(cr + pre, x_r + (size_t)(ix + nl) * cin, mid, 0);
      continue;
    }
    for (int64_t q = 0, iq = ix; q < cn; q++, iq += c->aw.di, cr += cg) {
      if (iq >= 0 && iq < c->aw.size) {
        mt_fill_s8(cr, x_r + (size_t)iq * cin, cg, 0);
      }
    }
  }
}

/* One phase row (output row oy, n pixels from column rx, stride_w apart; pixels [lo, hi) with
 * every tap inside the input in x) through gathered windows. iy, ix: the input row and column
 * of the first pixel's lowest tap; sb: room for a slice's base. */
static void ct_row_px(const ct_ctx *c, ct_phase *ph, const int8_t *x_g, int8_t *y_img, int32_t oy,
                      int32_t rx, int32_t n, int32_t lo, int32_t hi, int64_t iy, int64_t ix,
                      uint32_t *sb)
{
  const size_t cin = (size_t)c->cin, x_step = (size_t)c->ah.di * (size_t)c->aw.size * cin;
  const size_t run = (size_t)ph->cols.n * (size_t)c->cg;
  const int64_t di = c->ah.di, lack = iy < 0 ? -iy : 0, room = c->ah.size - iy; /* tap rows */
  const int64_t below = di == 1 ? lack : (lack + di - 1) / di; /* inside: [r_lo, r_hi) */
  const int64_t above = room <= 0 ? 0 : di == 1 ? room : (room + di - 1) / di;
  const int32_t r_lo = below < ph->rows.n ? (int32_t)below : ph->rows.n;
  const int32_t r_hi = above < r_lo ? r_lo : above < ph->rows.n ? (int32_t)above : ph->rows.n;
  const int8_t *x_r = x_g + (r_lo < r_hi ? (size_t)(iy + r_lo * di) * (size_t)c->aw.size * cin : 0);
  const int slice = r_lo < r_hi && r_hi - r_lo < ph->rows.n; /* else every tap row */
  ph->w_lo = slice ? r_lo : 0, ph->w_hi = slice ? r_hi : ph->rows.n, ph->bs = ph->base;
  if (slice && (ph->b_lo != r_lo || ph->b_hi != r_hi)) {
    ct_wbase(c, ph, ph->w + (size_t)r_lo * run, (uint32_t)((size_t)(r_hi - r_lo) * run), sb);
    ph->b_lo = r_lo, ph->b_hi = r_hi;
  }
  ph->bs = slice ? sb : ph->base;
  if (c->groups != 1 || c->aw.di != 1 || r_lo == r_hi) {
    lo = hi = 0; /* tap rows are no runs, or nothing lands: ct_gather */
  }
  const int8_t *x_in = lo < hi ? x_r + (size_t)(ix + lo) * cin : x_r; /* pixel lo's window */
  for (int32_t i = 0; i < n; i++) {
    if (ph->np == 0) {
      ph->oy = oy, ph->ox = rx + i * c->aw.stride;
    }
    if (i >= lo && i < hi) { /* tap rows as runs */
      const int8_t *x = x_in + (size_t)(i - lo) * cin;
      int8_t *col = ph->col + (size_t)ph->np++ * ph->kp;
      for (int32_t r = r_lo; r < r_hi; r++, col += run, x += x_step) {
        mt_fill_s8(col, x, run, 0);
      }
    } else {
      ct_gather(c, ph, x_r, r_lo, r_hi, ix + i);
    }
    if (ph->np == MT_PX) {
      ct_flush(c, ph, y_img);
    }
  }
  ct_flush(c, ph, y_img);
}

#endif /* MT_CONV_TRANSPOSE_PX_H */
