/*
 * mt_kernel_isa.h - which instruction set the kernels are built for, and the inlining controls
 * of their helpers.
 *
 * ISA level (compile time, from the target flags): MT_MVE (integer Helium, Cortex-M55/M85),
 * MT_DSP (SIMD MAC, Cortex-M4/M7/M33/M55), neither (host, M0/M0+/M3/M23: pure C). Kernels keep
 * one function per step, with the variants around the inner loop only:
 *     #if MT_MVE ... #else #if MT_DSP ... #endif #endif, then a scalar tail shared by all;
 * where the ISA bodies of a step are long, each is a helper (mt_kernel_mve.h, mt_kernel_dsp.h,
 * a family's *_mve.h / *_dsp.h) and the #if ladder picks between calls.
 * Building with -DMT_NO_SIMD forces the pure-C path on any core.
 */
#ifndef MT_KERNEL_ISA_H
#define MT_KERNEL_ISA_H

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && !defined(MT_NO_SIMD)
#define MT_MVE 1
#include <arm_mve.h>
#else /* no integer MVE, or MT_NO_SIMD */
#define MT_MVE 0
#endif /* __ARM_FEATURE_MVE */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && !defined(MT_NO_SIMD)
#define MT_DSP 1
#include <arm_acle.h>
#else /* no DSP extension, or MT_NO_SIMD */
#define MT_DSP 0
#endif /* __ARM_FEATURE_DSP */

/* Keeps a hot inner loop in its own function, so that its accumulators get registers instead of
 * competing with the caller's loop state (gcc and clang otherwise inline it away); `unused`:
 * a helper of this header that a kernel does not call is no warning. */
#if defined(__GNUC__)
#define MT_NOINLINE __attribute__((noinline, unused))
#else /* !__GNUC__ */
#define MT_NOINLINE
#endif /* __GNUC__ */

/* Inlined into each caller, so that a constant argument (a variant flag) specialises the body. */
#if defined(__GNUC__)
#define MT_ALWAYS_INLINE inline __attribute__((always_inline))
#else /* !__GNUC__ */
#define MT_ALWAYS_INLINE inline
#endif /* __GNUC__ */

#endif /* MT_KERNEL_ISA_H */
