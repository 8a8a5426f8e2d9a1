/*
 * mt_depthwise_dsp.h - the DSP path of mt_depthwise_conv2d_s8.c for depth multiplier 1: four
 * channels per pass. Included by that file only (after dw_ctx, DW_MAC4, mt_depthwise_out.h).
 *
 * SXTAB16 adds x_off to two bytes of x at once (channels 0/2, then 1/3 with ROR #8), SMLABB /
 * SMLATT multiply them by the halfwords of the weights unpacked the same way. The taps of a
 * kernel row run in asm (gcc spills this loop's state in C) when x and w take the same steps.
 */
#ifndef MT_DEPTHWISE_DSP_H
#define MT_DEPTHWISE_DSP_H

#if MT_DSP && !MT_MVE
/* M == 1: y[0, C) of one pixel, x and w at its first in-bounds tap. */
static MT_ALWAYS_INLINE void dw_pixel_dsp(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                          const int8_t *w, int8_t *y)
{
  int32_t ch = 0;
  const size_t x_tap = k->xt, cm = k->wt, xrs = k->xrs, wrs = k->wrs;
  const int32_t off = c->x_off, n = c->c, rows = k->rows, cols = k->cols;
  const int32_t off2 = (int32_t)(((uint32_t)off & 0xFFFFu) * 0x00010001u); /* both halves */
  for (; n - ch >= 4; ch += 4) {
    const int32_t *b = c->bias + ch; /* distinct starting values (gcc would merge four zeros) */
    uint32_t a0 = (uint32_t)b[0], a1 = (uint32_t)b[1], a2 = (uint32_t)b[2], a3 = (uint32_t)b[3];
    const int8_t *xp = x + ch, *wp = w + ch;
    for (int32_t ky = 0; ky < rows; ky++, xp += xrs, wp += wrs) {
      if (x_tap == cm) {
        uint32_t t0, t1, t2, n_taps = (uint32_t)cols; /* w read twice: one register fewer */
        /* clang-format off */
        __asm__ volatile("1: ldr %[t0], [%[xp]]\n"
                         "   ldr %[t1], [%[wp]]\n"
                         "   add %[xp], %[xp], %[cm]\n"
                         "   sxtab16 %[t2], %[off], %[t0]\n"
                         "   sxtb16 %[t1], %[t1]\n"
                         "   smlabb %[a0], %[t2], %[t1], %[a0]\n"
                         "   smlatt %[a2], %[t2], %[t1], %[a2]\n"
                         "   ldr %[t1], [%[wp]]\n"
                         "   add %[wp], %[wp], %[cm]\n"
                         "   sxtab16 %[t0], %[off], %[t0], ror #8\n"
                         "   sxtb16 %[t1], %[t1], ror #8\n"
                         "   smlabb %[a1], %[t0], %[t1], %[a1]\n"
                         "   smlatt %[a3], %[t0], %[t1], %[a3]\n"
                         "   subs %[k], %[k], #1\n"
                         "   bne 1b\n"
                         : [xp] "+r"(xp), [wp] "+r"(wp), [k] "+r"(n_taps), [a0] "+r"(a0),
                           [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0),
                           [t1] "=&r"(t1), [t2] "=&r"(t2)
                         : [cm] "r"(cm), [off] "r"(off2)
                         : "cc", "memory");
        /* clang-format on */
        continue;
      }
      for (int32_t kx = 0; kx < cols; kx++, xp += x_tap, wp += cm) {
        DW_MAC4(off);
      }
    }
    dw_store_4(c, a0, a1, a2, a3, ch, y);
  }
  dw_tail(c, k, x, w, ch, n, y);
}
#endif /* MT_DSP && !MT_MVE */

#endif /* MT_DEPTHWISE_DSP_H */
