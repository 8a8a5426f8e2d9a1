/*
 * mt_conv_1x1_dots.h - the dot loop of the DSP and C variants of the 1x1 convolution fast path
 * (mt_conv_1x1.h): every channel pair of a pixel pair, against the unpacked input buffer.
 * Included by mt_conv_1x1.h only (not on MVE).
 *
 * One asm loop (DSP: LDM, SXTB16, SMLAD; Armv7-M without DSP such as Cortex-M3: LDM, LDRSB,
 * MLA) runs the channel pairs of a chunk back to back with every operand in a fixed register;
 * the input channels it leaves (Cin % C1X1_K), and builds without the asm, take the C loop.
 */
#ifndef MT_CONV_1X1_DOTS_H
#define MT_CONV_1X1_DOTS_H

#include "mt_kernel_util.h"

/* The dot loop in asm, on DSP cores (SMLAD) and on Armv7-M / Armv8-M Mainline without DSP
 * (Cortex-M3: MLA). It pins all 14 registers, r7 included: gcc with the frame pointer omitted
 * (optimizing); other builds (clang keeps r7 reserved) run the C loop. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) &&                           \
    defined(__ARM_ARCH_ISA_THUMB) && __ARM_ARCH_ISA_THUMB == 2 && !defined(MT_NO_SIMD)
#define C1X1_DSP MT_DSP
#define C1X1_T2  (!MT_DSP)
#define C1X1_K   (MT_DSP ? 8 : 4) /* input channels per pass of the asm loop */
#else /* clang, -O0, Thumb-1 or MT_NO_SIMD */
#define C1X1_DSP 0
#define C1X1_T2  0
#endif /* gcc -O1.. on Thumb-2 */

#if C1X1_DSP || C1X1_T2
/* The asm loop's frame: acc, pairs left, bytes of buf per pass, the step from the end of a
 * weight row to the same row of the next pair, bias (on the stack: every register is in use).
 * Per pair: accumulators from the biases, the steps over buf, a0, b0, a1, b1 stored. */
/* clang-format off */
#define C1X1_LOOP_HEAD                                                                         \
  "   push {r0, r1, r2, r3, r12}\n"                                                            \
  "2: ldr r12, [sp, #16]\n"                                                                    \
  "   ldrd r8, r10, [r12], #8\n"                                                               \
  "   str r12, [sp, #16]\n"                                                                    \
  "   mov r9, r8\n"                                                                            \
  "   mov r11, r10\n"
#define C1X1_LOOP_TAIL                                                                         \
  "   cmp r4, r5\n"                                                                            \
  "   bne 1b\n"                                                                                \
  "   ldr r12, [sp]\n"                                                                         \
  "   stmia r12!, {r8, r9, r10, r11}\n"                                                        \
  "   str r12, [sp]\n"                                                                         \
  "   ldrd r12, lr, [sp, #8]\n"                                                                \
  "   sub r4, r4, r12\n"                                                                       \
  "   add r6, r6, lr\n"                                                                        \
  "   add r7, r7, lr\n"                                                                        \
  "   ldr r12, [sp, #4]\n"                                                                     \
  "   subs r12, r12, #1\n"                                                                     \
  "   str r12, [sp, #4]\n"                                                                     \
  "   bne 2b\n"                                                                                \
  "   add sp, sp, #20\n"
/* clang-format on */
/* One step of four words of buf (pixels a, b) against both weight rows, twice per pass:
 * DSP: four input channels (SXTB16 lanes, SMLAD); Cortex-M3: two (LDRSB, MLA). */
#if C1X1_DSP
/* clang-format off */
#define C1X1_STEP                                                                              \
  "   ldm r4!, {r0, r1, r2, r3}\n"                                                             \
  "   ldr r12, [r6], #4\n"                                                                     \
  "   sxtb16 lr, r12\n"                                                                        \
  "   sxtb16 r12, r12, ror #8\n"                                                               \
  "   smlad r8, r0, lr, r8\n"                                                                  \
  "   smlad r8, r1, r12, r8\n"                                                                 \
  "   smlad r9, r2, lr, r9\n"                                                                  \
  "   smlad r9, r3, r12, r9\n"                                                                 \
  "   ldr r12, [r7], #4\n"                                                                     \
  "   sxtb16 lr, r12\n"                                                                        \
  "   sxtb16 r12, r12, ror #8\n"                                                               \
  "   smlad r10, r0, lr, r10\n"                                                                \
  "   smlad r10, r1, r12, r10\n"                                                               \
  "   smlad r11, r2, lr, r11\n"                                                                \
  "   smlad r11, r3, r12, r11\n"
/* clang-format on */
#else /* C1X1_T2 */
/* clang-format off */
#define C1X1_STEP                                                                              \
  "   ldm r4!, {r0, r1, r2, r3}\n"                                                             \
  "   ldrsb r12, [r6], #1\n"                                                                   \
  "   mla r8, r0, r12, r8\n"                                                                   \
  "   mla r9, r1, r12, r9\n"                                                                   \
  "   ldrsb r12, [r6], #1\n"                                                                   \
  "   mla r8, r2, r12, r8\n"                                                                   \
  "   mla r9, r3, r12, r9\n"                                                                   \
  "   ldrsb r12, [r7], #1\n"                                                                   \
  "   mla r10, r0, r12, r10\n"                                                                 \
  "   mla r11, r1, r12, r11\n"                                                                 \
  "   ldrsb r12, [r7], #1\n"                                                                   \
  "   mla r10, r2, r12, r10\n"                                                                 \
  "   mla r11, r3, r12, r11\n"
/* clang-format on */
#endif /* C1X1_DSP */
#endif /* C1X1_DSP || C1X1_T2 */

/* acc[4j .. 4j+3] = (a0, b0, a1, b1): bias[2j] (0) or bias[2j+1] (1) plus the sums x * w of
 * pixels a, b of buf with weight rows w + 2j * Cin (0) and the next one (1; the same row when
 * `same`), j < n. Every operand of the asm sits in a fixed register (gcc finds no 14 itself). */
static MT_ALWAYS_INLINE void c1x1_dots(const int32_t *buf, const int8_t *w, int32_t cin, int32_t n,
                                       int same, const int32_t *bias, uint32_t *acc)
{
  int32_t k0 = 0;
  if (n == 0) {
    return;
  }
#if C1X1_DSP || C1X1_T2
  const int32_t k_asm = cin & ~(C1X1_K - 1), words = C1X1_DSP ? k_asm : 2 * k_asm;
  if (k_asm > 0) {
    register uint32_t *r0 __asm__("r0") = acc;
    register int32_t r1 __asm__("r1") = n, r2 __asm__("r2") = words * 4;
    register int32_t r3 __asm__("r3") = 2 * cin - k_asm;
    register const int32_t *xr __asm__("r4") = buf, *end __asm__("r5") = buf + words;
    register const int8_t *wa __asm__("r6") = w, *wb __asm__("r7") = same ? w : w + cin;
    register uint32_t a0 __asm__("r8"), b0 __asm__("r9"), a1 __asm__("r10"), b1 __asm__("r11");
    register const int32_t *t __asm__("r12") = bias;
    register uint32_t u __asm__("lr");
    /* clang-format off */
    __asm__ volatile(C1X1_LOOP_HEAD "1:" C1X1_STEP C1X1_STEP C1X1_LOOP_TAIL
                     : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3), "+r"(xr), "+r"(wa), "+r"(wb),
                       "=&r"(a0), "=&r"(b0), "=&r"(a1), "=&r"(b1), "+r"(t), "=&r"(u)
                     : "r"(end)
                     : "cc", "memory");
    /* clang-format on */
    k0 = k_asm;
    buf += words;
  } else
#endif /* C1X1_DSP || C1X1_T2 */
  {
    for (int32_t j = 0; j < 2 * n; j++) {
      acc[2 * j] = acc[2 * j + 1] = (uint32_t)bias[j];
    }
  }
  for (int32_t j = 0; j < n && k0 < cin; j++, acc += 4) { /* the channels the asm left */
    const int8_t *w0 = w + 2 * (size_t)j * (size_t)cin, *w1 = same ? w0 : w0 + cin;
    const int32_t *xp = buf;
    for (int32_t k = k0; k < cin; k++, xp += 2) {
      acc[0] += (uint32_t)(xp[0] * w0[k]);
      acc[1] += (uint32_t)(xp[1] * w0[k]);
      acc[2] += (uint32_t)(xp[0] * w1[k]);
      acc[3] += (uint32_t)(xp[1] * w1[k]);
    }
  }
}

#endif /* MT_CONV_1X1_DOTS_H */
