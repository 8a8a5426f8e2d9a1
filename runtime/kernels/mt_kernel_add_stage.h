/*
 * mt_kernel_add_stage.h - add's integer rule (docs/numerics.md, add) shared by mt_add_s8 and by
 * the output stage of conv2d_add: the scalar multiply-high helpers of add's fast path, and the
 * residual add stage (mt_add_stage) a MAC kernel's output stage applies to each conv value
 * before it stores it.
 *
 * The add stage: y[i] = add(c, skip[i]) with c the conv's int8 output at i (its own zero point,
 * clamped to its own range) as add's a and skip[i] as b. The stage reads skip[i] and then writes
 * y[i] (y may be skip's bytes), once per position: a kernel with the stage never stores a
 * position twice (repeated pixels and channels of a block are left out of the stores). Both
 * forms of mt_add_s8 are here, picked by the same scales (add_fast_ok there, `fast` here):
 *   fast     input shifts 9..31, output shift 33..54: the rounded high words of mt_add_s8's
 *            fast path (scalar: SMMULR/SMMLAR/SMMLA or SMLAL; MVE: VQRDMULH, VQRDMLAH,
 *            VQDMULH + VQADD, which saturate where VQDMLASH does), exact on every ISA level
 *   general  mt_rq on 64 bits (MVE: mt_rq_n_v on four lanes)
 */
#ifndef MT_KERNEL_ADD_STAGE_H
#define MT_KERNEL_ADD_STAGE_H

#include "mt_kernel_add.h" /* mt_add_fast_ok */
#include "mt_kernel_util.h"

/* Armv7-M / Armv8-M Mainline scalar instructions (SMLAL, SSAT), unless -DMT_NO_SIMD */
#if defined(__ARM_FEATURE_SAT) && __ARM_ARCH_ISA_THUMB == 2 && !defined(MT_NO_SIMD)
#define MT_ADD_T2 1
#else /* no SSAT, Thumb-1 or MT_NO_SIMD */
#define MT_ADD_T2 0
#endif /* __ARM_FEATURE_SAT */

#if !MT_MVE
/* (x * m + 2^31) >> 32, acc + (x * m + 2^31) >> 32 and acc + (x * m) >> 32: exact */
#if MT_DSP
static inline int32_t mt_add_mulhr(int32_t x, int32_t m)
{
  int32_t r;
  __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(x), "r"(m));
  return r;
}
static inline int32_t mt_add_mlahr(int32_t acc, int32_t x, int32_t m)
{
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(m), "r"(acc));
  return r;
}
static inline int32_t mt_add_mlah(int32_t acc, int32_t x, int32_t m)
{
  int32_t r;
  __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(m), "r"(acc));
  return r;
}
#elif MT_ADD_T2 /* SMLAL on a low word set inside the asm: no register holds the constant */
static inline int32_t mt_add_mlahr(int32_t acc, int32_t x, int32_t m)
{
  uint32_t lo;
  __asm__("mov %0, #0x80000000\n\tsmlal %0, %1, %2, %3" : "=&r"(lo), "+r"(acc) : "r"(x), "r"(m));
  return acc;
}
static inline int32_t mt_add_mulhr(int32_t x, int32_t m)
{
  int32_t hi;
  uint32_t lo;
  /* clang-format off */
  __asm__("mov %0, #0x80000000\n\tmov %1, #0\n\tsmlal %0, %1, %2, %3"
          : "=&r"(lo), "=&r"(hi) : "r"(x), "r"(m));
  /* clang-format on */
  return hi;
}
static inline int32_t mt_add_mlah(int32_t acc, int32_t x, int32_t m)
{
  return acc + (int32_t)(((int64_t)x * m) >> 32);
}
#else /* !MT_DSP && !MT_ADD_T2 */
static inline int32_t mt_add_mulhr(int32_t x, int32_t m)
{
  return (int32_t)(((int64_t)x * m + 0x80000000) >> 32);
}
static inline int32_t mt_add_mlahr(int32_t acc, int32_t x, int32_t m)
{
  return acc + mt_add_mulhr(x, m);
}
static inline int32_t mt_add_mlah(int32_t acc, int32_t x, int32_t m)
{
  return acc + (int32_t)(((int64_t)x * m) >> 32);
}
#endif /* MT_DSP */
#endif /* !MT_MVE */

/* The residual add of conv2d_add as a MAC kernel's output stage (mt_out_stage.add). */
struct mt_conv_ctx; /* mt_conv2d_s8.c's conv_ctx */

typedef struct mt_add_stage {
  uintptr_t skip; /* skip's address minus y's (mod 2^N): y + i's skip element is y + skip + i */
  const int32_t *at; /* add's attributes (MT_ADD_* order) */
  int fast; /* mt_add_fast_ok */
  int32_t d; /* conv_zp - a_zp: c - a_zp == (c - conv_zp) + d */
  int32_t ka, ca, kb, cb, k, co, lo, hi; /* the fast path's constants (per ISA level) */
  /* add's same-shape loop (mt_add_same_s8, set by conv2d_add: a plain conv2d build links no
   * add), which staged spans of the conv's output go through */
  void (*same)(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, const int32_t *at);
  /* the gathered-window conv loop with the add (mt_conv_gathered_add, set by conv2d_add: plain
   * conv2d keeps a loop without it) */
  void (*gathered)(const struct mt_conv_ctx *c, int32_t oc0, int32_t nc, const uint32_t *base,
                   int8_t *col);
} mt_add_stage;

/* The stage of add attributes `at` (in the domain) for a conv of output zero point conv_zp
 * writing y, with skip at `skip`. */
static inline void mt_add_stage_init(mt_add_stage *s, const int32_t *at, int32_t conv_zp,
                                     const int8_t *skip, const int8_t *y)
{
  const int32_t q = MT_MVE ? 31 : 32; /* the doubling multiplies of MVE take one bit less */
  s->skip = (uintptr_t)skip - (uintptr_t)y;
  s->at = at;
  s->fast = mt_add_fast_ok(at);
  s->d = conv_zp - at[MT_ADD_A_ZP];
  s->lo = at[MT_ADD_ACT_MIN];
  s->hi = at[MT_ADD_ACT_MAX];
  if (s->fast) {
    s->ka = 1 << (q - at[MT_ADD_A_SHIFT]);
    s->kb = 1 << (q - at[MT_ADD_B_SHIFT]);
    s->ca = (MT_MVE ? s->d : -at[MT_ADD_A_ZP]) * s->ka; /* MVE takes c - conv_zp, C takes c */
    s->cb = -at[MT_ADD_B_ZP] * s->kb;
    s->k = at[MT_ADD_OUT_SHIFT] - q;
    s->co = (1 << (s->k - 1)) + at[MT_ADD_OUT_ZP] * (1 << s->k);
  }
}

/* Where the skip element of output byte y is. */
static inline const int8_t *mt_add_skip(const mt_add_stage *s, const int8_t *y)
{
  return (const int8_t *)((uintptr_t)y + s->skip);
}

#if MT_MVE
/* add(conv_zp + r, b) on four lanes: r the conv's clamped values less conv_zp, b skip's. */
static MT_ALWAYS_INLINE int32x4_t mt_add_stage_v(const mt_add_stage *s, int32x4_t r, int32x4_t b)
{
  const int32_t *at = s->at;
  if (s->fast) {
    int32x4_t qa = vaddq_n_s32(vmulq_n_s32(r, s->ka), s->ca); /* (c - a_zp) << (31 - a_shift) */
    const int32x4_t qb = vaddq_n_s32(vmulq_n_s32(b, s->kb), s->cb);
    qa = vqrdmlahq_n_s32(vqrdmulhq_n_s32(qa, at[MT_ADD_A_MULT]), qb, at[MT_ADD_B_MULT]);
    qa = vqaddq_n_s32(vqdmulhq_n_s32(qa, at[MT_ADD_OUT_MULT]), s->co);
    qa = vshlq_r_s32(qa, -s->k);
    return vminq_s32(vmaxq_s32(qa, vdupq_n_s32(s->lo)), vdupq_n_s32(s->hi));
  }
  const int32x4_t ra = mt_rq_n_v(vaddq_n_s32(r, s->d), at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]);
  const int32x4_t rb =
      mt_rq_n_v(vsubq_n_s32(b, at[MT_ADD_B_ZP]), at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
  const int32_t zp = at[MT_ADD_OUT_ZP];
  const int32x4_t v = mt_rq_n_v(vaddq_s32(ra, rb), at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT]);
  return vaddq_n_s32(vminq_s32(vmaxq_s32(v, vdupq_n_s32(s->lo - zp)), vdupq_n_s32(s->hi - zp)), zp);
}
#else /* !MT_MVE */
/* add(c, b): c the conv's int8 output, b skip's element. */
static MT_ALWAYS_INLINE int8_t mt_add_stage_one(const mt_add_stage *s, int32_t c, int32_t b)
{
  const int32_t *at = s->at;
  int32_t v;
  if (s->fast) {
    const int32_t sum = mt_add_mlahr(mt_add_mulhr(c * s->ka + s->ca, at[MT_ADD_A_MULT]),
                                     b * s->kb + s->cb, at[MT_ADD_B_MULT]);
    v = mt_add_mlah(s->co, sum, at[MT_ADD_OUT_MULT]) >> s->k;
  } else {
    const int64_t ra = mt_rq(c - at[MT_ADD_A_ZP], at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]);
    const int64_t rb = mt_rq(b - at[MT_ADD_B_ZP], at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
    return mt_requantize((int32_t)(ra + rb), at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT],
                         at[MT_ADD_OUT_ZP], s->lo, s->hi);
  }
  return (int8_t)(v < s->lo ? s->lo : (v > s->hi ? s->hi : v));
}

/* *y = add(c, *y's skip element) */
static inline void mt_add_stage_store(const mt_add_stage *s, int32_t c, int8_t *y)
{
  *y = mt_add_stage_one(s, c, *mt_add_skip(s, y));
}
#endif /* MT_MVE */

#define MT_CONV_WIN_MAX 1024 /* the largest window mt_conv2d_s8 gathers (bytes) */

/* conv2d with the add stage (NULL: plain conv2d) in its output stage: mt_conv2d_s8.c. Its
 * scratch (args->scratch) may stage whole output pixels for add's own loop (MT_ADD_STAGED). */
mt_status mt_conv2d_stage_s8(const mt_op_args *args, const mt_add_stage *add);
/* mt_conv2d_s8.c's gathered-window loop with the add (mt_add_stage.gathered). */
void mt_conv_gathered_add(const struct mt_conv_ctx *c, int32_t oc0, int32_t nc,
                          const uint32_t *base, int8_t *col);

/* y[i] = add(a[i], b[i]), i < n, attributes at in the domain: mt_add_s8's same-shape loop (its
 * fast and general paths; y may be a or b). */
void mt_add_same_s8(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, const int32_t *at);

/* Where conv2d_add stages the conv's output for add's loop: add's loop costs fewer instructions
 * per element than the add in the conv's output stage, except on Armv6-M / Armv8-M Baseline
 * (no SMLAL, SSAT), where the output stage wins (bench/residual.py). */
#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
#define MT_ADD_STAGED 0
#else /* Armv7-M, Armv8-M Mainline, the host */
#define MT_ADD_STAGED 1
#endif /* Armv6-M */

#endif /* MT_KERNEL_ADD_STAGE_H */
