/*
 * mt_kernel_mac.h - the inner loops of the MAC kernels (conv2d, fully_connected): int8 dot
 * products of one input run against four weight rows (four output channels share each x load).
 *
 * Zero points: the reference sums (x - in_zp) * w. The loops here sum the raw products x * w,
 * and the kernels add x_off * sum(w) (x_off = -in_zp) once per output, from mt_wsum4_s8 or a
 * per-call cache: sum (x + x_off) * w == sum x * w + x_off * sum w, exactly, on 32 bits (wrapping
 * arithmetic; on the reference's domain every accumulator fits int32). Taps in the padding add
 * nothing to either sum. This keeps the MVE loop at one VMLADAV per 16 MACs: x_off (up to 128)
 * does not fit an int8 lane.
 *
 *   MVE   16 bytes per step: VLDRB (tail-predicated with VCTP) + VMLADAVA per row
 *   DSP   4 bytes per step: unaligned LDR, SXTB16 (bytes 0/2, then 1/3), two SMLAD per row
 *   C     one byte per step, the tail of the two above
 */
#ifndef MT_KERNEL_MAC_H
#define MT_KERNEL_MAC_H

#include "mt_kernel_util.h"

/* acc[j] += sum over i < n of x[i] * w[j][off + i], j < 4, wrapping on 32 bits. */
static MT_NOINLINE void mt_dot4_s8(const int8_t *x, const int8_t *const w[4], size_t off,
                                   uint32_t n, uint32_t acc[4])
{
  const int8_t *w0 = w[0] + off, *w1 = w[1] + off, *w2 = w[2] + off, *w3 = w[3] + off;
  uint32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  uint32_t i = 0;
#if MT_MVE
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int32_t left = (int32_t)n; left > 0; left -= 16) {
    const mve_pred16_t p = vctp8q((uint32_t)left);
    const int8x16_t xv = vldrbq_z_s8(x, p);
    s0 = vmladavaq_s8(s0, xv, vldrbq_z_s8(w0, p));
    s1 = vmladavaq_s8(s1, xv, vldrbq_z_s8(w1, p));
    s2 = vmladavaq_s8(s2, xv, vldrbq_z_s8(w2, p));
    s3 = vmladavaq_s8(s3, xv, vldrbq_z_s8(w3, p));
    x += 16;
    w0 += 16;
    w1 += 16;
    w2 += 16;
    w3 += 16;
  }
  a0 += (uint32_t)s0;
  a1 += (uint32_t)s1;
  a2 += (uint32_t)s2;
  a3 += (uint32_t)s3;
  n = 0; /* no tail */
#else /* !MT_MVE */
#if MT_DSP
  for (; n - i >= 4; i += 4) {
    const uint32_t xv = mt_read_s8x4(x + i);
    const int32_t x02 = __sxtb16(xv), x13 = __sxtb16(mt_ror8(xv));
    uint32_t v = mt_read_s8x4(w0 + i);
    a0 = (uint32_t)__smlad(x13, __sxtb16(mt_ror8(v)), __smlad(x02, __sxtb16(v), (int32_t)a0));
    v = mt_read_s8x4(w1 + i);
    a1 = (uint32_t)__smlad(x13, __sxtb16(mt_ror8(v)), __smlad(x02, __sxtb16(v), (int32_t)a1));
    v = mt_read_s8x4(w2 + i);
    a2 = (uint32_t)__smlad(x13, __sxtb16(mt_ror8(v)), __smlad(x02, __sxtb16(v), (int32_t)a2));
    v = mt_read_s8x4(w3 + i);
    a3 = (uint32_t)__smlad(x13, __sxtb16(mt_ror8(v)), __smlad(x02, __sxtb16(v), (int32_t)a3));
  }
#endif /* MT_DSP */
#endif /* MT_MVE */
  for (; i < n; i++) {
    const int32_t xv = x[i];
    a0 += (uint32_t)(xv * w0[i]);
    a1 += (uint32_t)(xv * w1[i]);
    a2 += (uint32_t)(xv * w2[i]);
    a3 += (uint32_t)(xv * w3[i]);
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}

/* sum[j] += sum over i < n of w[j][off + i], j < 4, wrapping on 32 bits. */
static MT_NOINLINE void mt_wsum4_s8(const int8_t *const w[4], size_t off, uint32_t n,
                                    uint32_t sum[4])
{
  for (int32_t j = 0; j < 4; j++) {
    const int8_t *wj = w[j] + off;
    uint32_t s = sum[j], i = 0;
#if MT_MVE
    for (int32_t left = (int32_t)n; left > 0; left -= 16, wj += 16) {
      s = (uint32_t)vaddvaq_s8((int32_t)s, vldrbq_z_s8(wj, vctp8q((uint32_t)left)));
    }
    i = n;
#else /* !MT_MVE */
#if MT_DSP
    for (; n - i >= 4; i += 4) {
      const uint32_t v = mt_read_s8x4(wj + i);
      s = (uint32_t)__smlad(__sxtb16(v), 0x00010001, __smlad(__sxtb16(mt_ror8(v)), 0x00010001,
                                                             (int32_t)s));
    }
#endif /* MT_DSP */
#endif /* MT_MVE */
    for (; i < n; i++) {
      s += (uint32_t)(int32_t)wj[i];
    }
    sum[j] = s;
  }
}

/* y[j] = clamp(rq(acc[j], mult[j], shift[j]) + zp, lo, hi) for j < n (1..4). */
static inline void mt_requantize4(const uint32_t acc[4], const int32_t *mult,
                                  const int32_t *shift, int32_t n, int32_t zp, int32_t lo,
                                  int32_t hi, int8_t *y)
{
#if MT_MVE
  mt_requantize4_v(vldrwq_s32((const int32_t *)acc), mult, shift, n, zp, lo, hi, y);
#else /* !MT_MVE */
  for (int32_t j = 0; j < n; j++) {
    y[j] = mt_requantize(mt_wrap_s32(acc[j]), mult[j], shift[j], zp, lo, hi);
  }
#endif /* MT_MVE */
}

#endif /* MT_KERNEL_MAC_H */
