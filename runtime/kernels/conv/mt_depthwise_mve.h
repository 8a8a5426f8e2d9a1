/*
 * mt_depthwise_mve.h - the MVE (Helium) path of mt_depthwise_conv2d_s8.c for depth multiplier 1:
 * every channel of one output pixel, 16 or 8 at a time on int16 lanes. Included by that file
 * only (after dw_ctx).
 *
 * VLDRB.S16 widens 8 channels, x + x_off fits int16, and VMULLB/VMULLT give the exact int32
 * products of the even and odd channels (|(x + x_off) * w| <= 255 * 128), summed in int32x4
 * accumulators (channels 0/2/4/6 and 1/3/5/7 of each 8); bias, mult, shift are gathered and y
 * scattered in the same order.
 */
#ifndef MT_DEPTHWISE_MVE_H
#define MT_DEPTHWISE_MVE_H

#if MT_MVE
/* The output stage of the four channels offs[j] of q (mult, shift, y at the block):
 * y = clamp(rq(acc) + zp). hi_only: every shift > 32, where the low product word never reaches
 * the result (mt_rq_v). */
typedef struct {
  const int32_t *mult, *shift;
  int32_t zp, lo, hi, hi_only; /* lo, hi: the act range less zp */
} dw_rq_mve;

static inline void dw_rq4(const dw_rq_mve *q, int32x4_t acc, int32_t o, uint32x4_t offs,
                          int8_t *y)
{
  const int32x4_t s = vldrwq_gather_shifted_offset_s32(q->shift + o, offs);
  const int32x4_t m = vldrwq_gather_shifted_offset_s32(q->mult + o, offs);
  const int32x4_t sh = vsubq_s32(vdupq_n_s32(32), s);
  const int32x4_t r = q->hi_only ? vrshlq_s32(vmulhq_s32(acc, m), sh)
                                 : mt_rq_v(acc, m, sh, vnegq_s32(s));
  const int32x4_t v = vminq_s32(vmaxq_s32(r, vdupq_n_s32(q->lo)), vdupq_n_s32(q->hi));
  vstrbq_scatter_offset_s32(y + o, offs, vaddq_n_s32(v, q->zp));
}

/* Fewer than 8 channels [ch, ch + nb) of one pixel: int32 lanes, predicated. */
static MT_NOINLINE void dw_tail_mve(const dw_ctx *c, const int8_t *x, const int8_t *w,
                                    int32_t rows, int32_t cols, int32_t ch, int32_t nb, int8_t *y)
{
  const mve_pred16_t p0 = vctp32q((uint32_t)nb), p1 = vctp32q((uint32_t)(nb > 4 ? nb - 4 : 0));
  const int32_t off = c->x_off;
  int32x4_t v0 = vldrwq_z_s32(c->bias + ch, p0), v1 = vldrwq_z_s32(c->bias + ch + 4, p1);
  for (int32_t ky = 0; ky < rows; ky++, x += c->x_row, w += c->w_row) {
    const int8_t *xp = x, *wp = w;
    for (int32_t kx = 0; kx < cols; kx++, xp += c->x_tap, wp += c->c) {
      v0 = vaddq_s32(v0, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp, p0), off), vldrbq_z_s32(wp, p0)));
      v1 = vaddq_s32(v1, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(xp + 4, p1), off),
                                   vldrbq_z_s32(wp + 4, p1)));
    }
  }
  for (int32_t q = 0; q < nb; q += 4) {
    mt_requantize4_v(q ? v1 : v0, c->mult + ch + q, c->shift + ch + q, nb - q, c->out_zp,
                     c->act_min, c->act_max, y + ch + q);
  }
}

/* One kernel window for 16 channels: rows x cols taps, x steps xt per column and xrs more per
 * row, w steps cm and wrs. */
#define DW_TAP16                                                                                  \
  "   vldrb.s16 q0, [%[xp]]\n"                                                                  \
  "   vldrb.s16 q1, [%[wp]]\n"                                                                  \
  "   vadd.i16 q0, q0, %[off]\n"                                                                \
  "   vmullb.s16 q2, q0, q1\n"                                                                  \
  "   vmullt.s16 q3, q0, q1\n"                                                                  \
  "   vadd.i32 %q[e0], %q[e0], q2\n"                                                            \
  "   vadd.i32 %q[o0], %q[o0], q3\n"

/* M == 1: y[0, C) of one pixel (x, w at the window's first in-bounds tap, rows x cols taps). */
static MT_NOINLINE void dw_pixel_mve(const dw_ctx *c, const int8_t *x, const int8_t *w,
                                        int32_t rows, int32_t cols, int8_t *y)
{
  const size_t xt = c->x_tap, cm = (size_t)c->c;
  const size_t xrs = c->x_row - (size_t)cols * xt, wrs = c->w_row - (size_t)cols * cm;
  const int32_t off = c->x_off, n = c->c;
  const dw_rq_mve q = {c->mult, c->shift, c->out_zp, c->act_min - c->out_zp,
                       c->act_max - c->out_zp, c->rq_hi_only};
  const int32_t *const bias0 = c->bias;
  const uint32x4_t ev = vidupq_n_u32(0, 2), od = vidupq_n_u32(1, 2);
  if (rows <= 0 || cols <= 0) {
    rows = 0;
  }
  int32_t ch = 0;
  for (; n - ch >= 8; ch += 16) {
    const int32_t *bias = bias0 + ch;
    const int8_t *xp = x + ch, *wp = w + ch;
    int32x4_t e0 = vldrwq_gather_shifted_offset_s32(bias, ev);
    int32x4_t o0 = vldrwq_gather_shifted_offset_s32(bias, od);
    if (n - ch < 16) { /* one block of 8 */
      for (int32_t r = rows; r > 0; r--, xp += xrs, wp += wrs) {
        __asm__ volatile("   dls lr, %[cols]\n"
                         "2:\n" DW_TAP16
                         "   add %[xp], %[xt]\n"
                         "   add %[wp], %[cm]\n"
                         "   le lr, 2b\n"
                         : [xp] "+l"(xp), [wp] "+l"(wp), [e0] "+w"(e0), [o0] "+w"(o0)
                         : [cols] "r"(cols), [off] "r"(off), [xt] "r"(xt), [cm] "r"(cm)
                         : "q0", "q1", "q2", "q3", "lr", "memory");
      }
      dw_rq4(&q, e0, ch, ev, y);
      dw_rq4(&q, o0, ch, od, y);
      ch += 8;
      break;
    }
    int32x4_t e1 = vldrwq_gather_shifted_offset_s32(bias + 8, ev);
    int32x4_t o1 = vldrwq_gather_shifted_offset_s32(bias + 8, od);
    if (rows > 0) {
      int32_t r = rows;
      __asm__ volatile("1: dls lr, %[cols]\n"
                       "2:\n" DW_TAP16
                       "   vldrb.s16 q0, [%[xp], #8]\n"
                       "   vldrb.s16 q1, [%[wp], #8]\n"
                       "   vadd.i16 q0, q0, %[off]\n"
                       "   vmullb.s16 q2, q0, q1\n"
                       "   vmullt.s16 q3, q0, q1\n"
                       "   vadd.i32 %q[e1], %q[e1], q2\n"
                       "   vadd.i32 %q[o1], %q[o1], q3\n"
                       "   add %[xp], %[xt]\n"
                       "   add %[wp], %[cm]\n"
                       "   le lr, 2b\n"
                       "   add %[xp], %[xrs]\n"
                       "   add %[wp], %[wrs]\n"
                       "   subs %[r], #1\n"
                       "   bne 1b\n"
                       : [xp] "+l"(xp), [wp] "+l"(wp), [r] "+r"(r), [e0] "+w"(e0), [o0] "+w"(o0),
                         [e1] "+w"(e1), [o1] "+w"(o1)
                       : [cols] "r"(cols), [off] "r"(off), [xt] "r"(xt), [cm] "r"(cm),
                         [xrs] "r"(xrs), [wrs] "r"(wrs)
                       : "q0", "q1", "q2", "q3", "lr", "cc", "memory");
    }
    dw_rq4(&q, e0, ch, ev, y);
    dw_rq4(&q, o0, ch, od, y);
    dw_rq4(&q, e1, ch + 8, ev, y);
    dw_rq4(&q, o1, ch + 8, od, y);
  }
  if (ch < n) {
    dw_tail_mve(c, x + ch, w + ch, rows, cols, ch, n - ch, y);
  }
}
#endif /* MT_MVE */

#endif /* MT_DEPTHWISE_MVE_H */
