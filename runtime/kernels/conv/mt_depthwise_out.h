/*
 * mt_depthwise_out.h - the output stage of mt_depthwise_conv2d_s8.c on DSP and in C: window
 * sums (bias included) to int8. Included by that file only (after dw_ctx and dw_one).
 */
#ifndef MT_DEPTHWISE_OUT_H
#define MT_DEPTHWISE_OUT_H

#if !MT_MVE
/* y[0, n) of output channels o, o + 1, ... from their window sums acc (bias included);
 * the constants are read into locals first (a store to y may alias any of them). */
static MT_NOINLINE void dw_store(const dw_ctx *c, const uint32_t *acc, int32_t o, int32_t n,
                                 int8_t *y)
{
  const int32_t *mult = c->mult + o, *shift = c->shift + o;
  const int32_t zp = c->out_zp, lo = c->act_min, hi = c->act_max;
  if (!c->rq_hi_only) {
    for (int32_t b = 0; b < n; b++) {
      y[b] = mt_requantize(mt_wrap_s32(acc[b]), mult[b], shift[b], zp, lo, hi);
    }
    return;
  }
  for (int32_t b = 0; b < n; b++) { /* shift > 32: ((hi(p) >> (s - 33)) + 1) >> 1 rounds */
    const int64_t p = (int64_t)mt_wrap_s32(acc[b]) * mult[b];
    const int32_t v = ((((int32_t)(p >> 32) >> (shift[b] - 33)) + 1) >> 1) + zp;
    y[b] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
  }
}

/* dw_store for four channels when every shift > 32 (the rounding as there). DSP: SSAT to
 * int8, the four bytes packed in one word and clamped to the act range by SSUB8 + SEL
 * (bytewise max, min), one store. */
static inline int32_t dw_rq_hi(uint32_t acc, int32_t mult, int32_t shift, int32_t zp)
{
  const int32_t hi = (int32_t)(((int64_t)mt_wrap_s32(acc) * mult) >> 32);
  return (((hi >> (shift - 33)) + 1) >> 1) + zp;
}

static MT_NOINLINE void dw_store4_hi(const dw_ctx *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                     uint32_t a3, int32_t o, int8_t *y)
{
  const int32_t *m = c->mult + o, *s = c->shift + o, zp = c->out_zp;
#if MT_DSP
  const uint32_t lo4 = ((uint32_t)c->act_min & 0xFFu) * 0x01010101u;
  const uint32_t hi4 = ((uint32_t)c->act_max & 0xFFu) * 0x01010101u;
  uint32_t v = ((uint32_t)__ssat(dw_rq_hi(a0, m[0], s[0], zp), 8) & 0xFFu) |
               ((uint32_t)__ssat(dw_rq_hi(a1, m[1], s[1], zp), 8) & 0xFFu) << 8 |
               ((uint32_t)__ssat(dw_rq_hi(a2, m[2], s[2], zp), 8) & 0xFFu) << 16 |
               (uint32_t)__ssat(dw_rq_hi(a3, m[3], s[3], zp), 8) << 24;
  (void)__ssub8((int32_t)v, (int32_t)lo4); /* GE where v >= lo */
  v = (uint32_t)__sel((int32_t)v, (int32_t)lo4);
  (void)__ssub8((int32_t)hi4, (int32_t)v); /* GE where v <= hi */
  v = (uint32_t)__sel((int32_t)v, (int32_t)hi4);
  __builtin_memcpy(y, &v, 4);
#else /* !MT_DSP */
  const int32_t lo = c->act_min, hi = c->act_max;
  const int32_t v[4] = {dw_rq_hi(a0, m[0], s[0], zp), dw_rq_hi(a1, m[1], s[1], zp),
                        dw_rq_hi(a2, m[2], s[2], zp), dw_rq_hi(a3, m[3], s[3], zp)};
  for (int32_t b = 0; b < 4; b++) {
    y[b] = (int8_t)(v[b] < lo ? lo : (v[b] > hi ? hi : v[b]));
  }
#endif /* MT_DSP */
}

/* y[ch, ch + 4) from the four channels' window sums (bias included). */
static MT_ALWAYS_INLINE void dw_store_4(const dw_ctx *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, int32_t ch, int8_t *y)
{
  if (c->rq_hi_only) {
    dw_store4_hi(c, a0, a1, a2, a3, ch, y + ch);
    return;
  }
  const uint32_t acc[4] = {a0, a1, a2, a3};
  dw_store(c, acc, ch, 4, y + ch);
}

/* y[ch, n) one channel at a time (x, w at the window's first in-bounds tap of channel 0). */
static MT_ALWAYS_INLINE void dw_tail(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                     const int8_t *w, int32_t ch, int32_t n, int8_t *y)
{
  for (; ch < n; ch++) {
    const uint32_t acc = dw_one(c, k, x + ch, w + ch) + (uint32_t)c->bias[ch];
    dw_store(c, &acc, ch, 1, y + ch);
  }
}
#endif /* !MT_MVE */

#endif /* MT_DEPTHWISE_OUT_H */
