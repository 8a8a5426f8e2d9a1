/*
 * mt_mac16_dsp.h - the DSP (Armv7E-M / Armv8-M Mainline SIMD) dot loop of the int16 (a16w8) MAC
 * kernels: four weight rows against one int16 run in int32 (mt_mac16.h, which includes it).
 * Empty without MT_DSP or with MT_MVE.
 */
#ifndef MT_MAC16_DSP_H
#define MT_MAC16_DSP_H

#include "mt_kernel_util.h"

#if MT_DSP && !MT_MVE && defined(__OPTIMIZE__) /* -O0: r7 is the frame pointer */
/* acc[r] += sum_{k < n4} x[k] * w[r * ws + k] (r < nr, n4 > 0 a multiple of 4): per four
 * elements x as (x0, x2) and (x1, x3) (PKHBT / PKHTB, once for every row), each row's word of
 * weights as SXTB16 (w0, w2) and SXTB16 ROR #8 (w1, w3), two SMLAD; 26 instructions per 16
 * MACs. One asm loop over two pairs of rows, A at [wa], [wa + ws] (sums a0, a1) and B at [wb],
 * [wb + ws] (a2, a3), so thirteen registers suffice: nr = 4: A = rows 0, 1, B = rows 2, 3;
 * nr = 3: A = rows 1, 2, B = row 0 and row 1 again (unused); nr = 2: B repeats A; nr = 1: ws 0.
 * No row past nr is read. */
static MT_NOINLINE void mt_dot16_rows32_dsp(const int16_t *x, const int8_t *w, size_t ws,
                                            uint32_t n4, int32_t nr, int32_t *acc)
{
  const int16_t *end = x + n4;
  const int8_t *wa = nr == 3 ? w + ws : w, *wb = nr == 4 ? w + 2 * ws : w;
  const size_t step = nr > 1 ? ws : 0;
  int32_t a0 = acc[nr == 3], a1 = nr > 1 ? acc[1 + (nr == 3)] : 0,
          a2 = nr > 2 ? acc[nr == 3 ? 0 : 2] : 0;
  int32_t a3 = nr > 3 ? acc[3] : 0, p02, p13, t0, t1;
  /* clang-format off */
  __asm__ volatile("1: ldr %[t0], [%[x]], #4\n"
                   "   ldr %[t1], [%[x]], #4\n"
                   "   pkhbt %[p02], %[t0], %[t1], lsl #16\n"
                   "   pkhtb %[p13], %[t1], %[t0], asr #16\n"
                   "   ldr %[t0], [%[wa], %[ws]]\n"
                   "   sxtb16 %[t1], %[t0]\n"
                   "   smlad %[a1], %[p02], %[t1], %[a1]\n"
                   "   sxtb16 %[t1], %[t0], ror #8\n"
                   "   smlad %[a1], %[p13], %[t1], %[a1]\n"
                   "   ldr %[t0], [%[wa]], #4\n"
                   "   sxtb16 %[t1], %[t0]\n"
                   "   smlad %[a0], %[p02], %[t1], %[a0]\n"
                   "   sxtb16 %[t1], %[t0], ror #8\n"
                   "   smlad %[a0], %[p13], %[t1], %[a0]\n"
                   "   ldr %[t0], [%[wb], %[ws]]\n"
                   "   sxtb16 %[t1], %[t0]\n"
                   "   smlad %[a3], %[p02], %[t1], %[a3]\n"
                   "   sxtb16 %[t1], %[t0], ror #8\n"
                   "   smlad %[a3], %[p13], %[t1], %[a3]\n"
                   "   ldr %[t0], [%[wb]], #4\n"
                   "   sxtb16 %[t1], %[t0]\n"
                   "   smlad %[a2], %[p02], %[t1], %[a2]\n"
                   "   sxtb16 %[t1], %[t0], ror #8\n"
                   "   smlad %[a2], %[p13], %[t1], %[a2]\n"
                   "   cmp %[x], %[end]\n"
                   "   bne 1b\n"
                   : [x] "+r"(x), [wa] "+r"(wa), [wb] "+r"(wb), [a0] "+r"(a0), [a1] "+r"(a1),
                     [a2] "+r"(a2), [a3] "+r"(a3), [p02] "=&r"(p02), [p13] "=&r"(p13),
                     [t0] "=&r"(t0), [t1] "=&r"(t1)
                   : [end] "r"(end), [ws] "r"(step)
                   : "cc", "memory");
  /* clang-format on */
  if (nr == 3) {
    acc[0] = a2;
    acc[1] = a0;
    acc[2] = a1;
    return;
  }
  acc[0] = a0;
  for (int32_t r = 1; r < nr; r++) {
    acc[r] = r == 1 ? a1 : (r == 2 ? a2 : a3);
  }
}
#endif /* MT_DSP && !MT_MVE && __OPTIMIZE__ */

#endif /* MT_MAC16_DSP_H */
