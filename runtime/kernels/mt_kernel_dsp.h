/*
 * mt_kernel_dsp.h - DSP (Armv7E-M / Armv8-M Mainline SIMD) helpers shared by the kernels:
 * unaligned four-byte reads and SXTB16 of the odd bytes. Empty without MT_DSP.
 */
#ifndef MT_KERNEL_DSP_H
#define MT_KERNEL_DSP_H

#include <stdint.h>

#include "mt_kernel_isa.h"

#if MT_DSP
/* Four int8 at any address as one word (unaligned LDR: Armv7E-M / Armv8-M Mainline only). */
static inline uint32_t mt_read_s8x4(const int8_t *p)
{
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

/* Four int8 at *p as one word (unaligned LDR), then *p += 4: a post-indexed load that keeps gcc
 * from rewriting the pointer walk of a hot loop into base - counter addressing. */
static inline uint32_t mt_read_s8x4_inc(const int8_t **p)
{
  uint32_t v;
  __asm__("ldr %0, [%1], #4" : "=r"(v), "+r"(*p) : "m"(*(const int8_t(*)[4]) * p));
  return v;
}

/* Bytes 1 and 3 of v sign-extended to two halfwords: SXTB16 with ROR #8 (one instruction;
 * gcc does not fold a rotate into __sxtb16). */
static inline int32_t mt_sxtb16_ror8(uint32_t v)
{
  int32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
#endif /* MT_DSP */

#endif /* MT_KERNEL_DSP_H */
