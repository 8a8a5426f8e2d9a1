/*
 * mt_depthwise_mve.h - the MVE (Helium) path of mt_depthwise_conv2d_s8.c for depth multiplier 1:
 * whole blocks of 16 channels of one output pixel. Included by that file only (after dw_ctx and
 * dw_win); the tail of fewer than 16 channels stays with dw_block.
 */
#ifndef MT_DEPTHWISE_MVE_H
#define MT_DEPTHWISE_MVE_H

#if MT_MVE
/* The output stage of four channels at offs (in units of one channel) from mult, shift, y. */
static inline void dw_rq4(int32x4_t acc, const int32_t *mult, const int32_t *shift,
                          uint32x4_t offs, int32x4_t v32, int32x4_t vlo, int32x4_t vhi,
                          int32_t zp, int8_t *y)
{
  const int32x4_t s = vldrwq_gather_shifted_offset_s32(shift, offs);
  const int32x4_t r = mt_rq_v(acc, vldrwq_gather_shifted_offset_s32(mult, offs),
                              vsubq_s32(v32, s), vnegq_s32(s));
  vstrbq_scatter_offset_s32(y, offs, vaddq_n_s32(vminq_s32(vmaxq_s32(r, vlo), vhi), zp));
}

/* M == 1: channels [0, 16 * n16) of one output pixel (x, w at the window's first in-bounds
 * tap), 16 at a time on int16 lanes: VLDRB.S16 widens, x + x_off fits int16, and
 * VMULLB/VMULLT give the exact int32 products of the even and odd channels (|(x + x_off) * w|
 * <= 255 * 128), summed in four int32x4 accumulators (channels 0/2/4/6, 1/3/5/7, 8/10.., 9/11..);
 * bias, mult, shift are gathered and y scattered in the same order. */
static MT_NOINLINE void dw_blocks16(const dw_ctx *c, const dw_win *v, const int8_t *x,
                                    const int8_t *w, int32_t n16, int8_t *y)
{
  const size_t cm = (size_t)c->c, x_tap = (size_t)c->aw.dilation * cm;
  const size_t x_row = (size_t)c->ah.dilation * (size_t)c->aw.size * cm;
  const size_t w_row = (size_t)c->kw * cm;
  const int32_t off32 = c->x_off; /* VADD.I16 adds its low half to each int16 lane */
  const int32_t rows = v->ky1 - v->ky0, cols = v->kx1 - v->kx0, zp = c->out_zp;
  const uint32x4_t ev = vidupq_n_u32(0, 2), od = vidupq_n_u32(1, 2);
  const int32x4_t v32 = vdupq_n_s32(32), vlo = vdupq_n_s32(c->act_min - zp);
  const int32x4_t vhi = vdupq_n_s32(c->act_max - zp);
  const int32_t *bias = c->bias, *mult = c->mult, *shift = c->shift;
  for (int32_t b = 0; b < n16; b++, x += 16, w += 16, y += 16, bias += 16, mult += 16,
               shift += 16) {
    int32x4_t e0 = vldrwq_gather_shifted_offset_s32(bias, ev);
    int32x4_t o0 = vldrwq_gather_shifted_offset_s32(bias, od);
    int32x4_t e1 = vldrwq_gather_shifted_offset_s32(bias + 8, ev);
    int32x4_t o1 = vldrwq_gather_shifted_offset_s32(bias + 8, od);
    const int8_t *xr = x, *wr = w;
    for (int32_t ky = 0; ky < rows; ky++, xr += x_row, wr += w_row) {
      const int8_t *xp = xr, *wp = wr;
      if (cols <= 0) {
        continue;
      }
      /* one tap per step (gcc spills an accumulator of the same loop in C) */
      __asm__ volatile("   dls lr, %[cols]\n"
                       "1: vldrb.s16 q0, [%[xp]]\n"
                       "   vldrb.s16 q1, [%[wp]]\n"
                       "   vadd.i16 q0, q0, %[off]\n"
                       "   vmullb.s16 q2, q0, q1\n"
                       "   vmullt.s16 q3, q0, q1\n"
                       "   vadd.i32 %q[e0], %q[e0], q2\n"
                       "   vadd.i32 %q[o0], %q[o0], q3\n"
                       "   vldrb.s16 q0, [%[xp], #8]\n"
                       "   vldrb.s16 q1, [%[wp], #8]\n"
                       "   vadd.i16 q0, q0, %[off]\n"
                       "   vmullb.s16 q2, q0, q1\n"
                       "   vmullt.s16 q3, q0, q1\n"
                       "   vadd.i32 %q[e1], %q[e1], q2\n"
                       "   vadd.i32 %q[o1], %q[o1], q3\n"
                       "   add %[xp], %[xp], %[xt]\n"
                       "   add %[wp], %[wp], %[cm]\n"
                       "   le lr, 1b\n"
                       : [xp] "+r"(xp), [wp] "+r"(wp), [e0] "+w"(e0), [o0] "+w"(o0),
                         [e1] "+w"(e1), [o1] "+w"(o1)
                       : [cols] "r"(cols), [off] "r"(off32), [xt] "r"(x_tap), [cm] "r"(cm)
                       : "q0", "q1", "q2", "q3", "lr", "memory");
    }
    dw_rq4(e0, mult, shift, ev, v32, vlo, vhi, zp, y);
    dw_rq4(o0, mult, shift, od, v32, vlo, vhi, zp, y);
    dw_rq4(e1, mult + 8, shift + 8, ev, v32, vlo, vhi, zp, y + 8);
    dw_rq4(o1, mult + 8, shift + 8, od, v32, vlo, vhi, zp, y + 8);
  }
}
#endif /* MT_MVE */

#endif /* MT_DEPTHWISE_MVE_H */
