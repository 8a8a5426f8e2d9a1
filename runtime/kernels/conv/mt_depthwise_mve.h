/*
 * mt_depthwise_mve.h - the MVE (Helium) path of mt_depthwise_conv2d_s8.c for depth multiplier 1:
 * every channel of one output pixel. Included by that file only (after dw_ctx).
 *
 * When every shift exceeds 32 (the usual case) 16 or 8 channels at a time on int16 lanes, one
 * asm statement per block (bias, taps, output stage); otherwise, and for a tail of fewer than 8,
 * 8 at a time on int32 lanes with the exact output stage for any shift (dw_tail_mve).
 *
 * VLDRB.S16 widens 8 channels, x + x_off fits int16, and VMULLB/VMULLT give the exact int32
 * products of the even and odd channels (|(x + x_off) * w| <= 255 * 128), summed in int32x4
 * accumulators (channels 0/2/4/6 and 1/3/5/7 of each 8); bias, mult, shift are gathered and y
 * scattered in the same order.
 */
#ifndef MT_DEPTHWISE_MVE_H
#define MT_DEPTHWISE_MVE_H

#if MT_MVE
/* Up to 8 channels [ch, ch + nb) of one pixel: int32 lanes, predicated, any shift. */
static MT_NOINLINE void dw_tail_mve(const dw_ctx *c, const dw_walk *k, const int8_t *x,
                                    const int8_t *w, int32_t ch, int32_t nb, int8_t *y)
{
  const mve_pred16_t p0 = vctp32q((uint32_t)nb), p1 = vctp32q((uint32_t)(nb > 4 ? nb - 4 : 0));
  const int32_t off = c->x_off;
  int32x4_t v0 = vldrwq_z_s32(c->bias + ch, p0), v1 = vldrwq_z_s32(c->bias + ch + 4, p1);
  for (int32_t r = 0; r < k->rows; r++, x += k->xrs, w += k->wrs) {
    for (int32_t t = 0; t < k->cols; t++, x += k->xt, w += k->wt) {
      v0 = vaddq_s32(v0, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(x, p0), off), vldrbq_z_s32(w, p0)));
      v1 = vaddq_s32(v1,
                     vmulq_s32(vaddq_n_s32(vldrbq_z_s32(x + 4, p1), off), vldrbq_z_s32(w + 4, p1)));
    }
  }
  for (int32_t q = 0; q < nb; q += 4) {
    mt_requantize4_v(q ? v1 : v0, c->mult + ch + q, c->shift + ch + q, nb - q, c->out_zp,
                     c->act_min, c->act_max, y + ch + q);
  }
}

/* One block of 16 (or 8) channels of one pixel in one asm statement (gcc spills the
 * accumulators of this code written in C), for the case every shift > 32:
 *   q4..q7   accumulators (lane order dw_lanes), starting at the bias
 *   taps     rows x cols: x steps xt per column and xrs more per row, w steps cm and wrs
 *   output   rq by VMULH (the high product word) and one VRSHL by 32 - shift, which rounds
 *            exactly since the low word never reaches the result (mt_rq_v), + zp, clamp */
/* Lane offsets of the accumulators of a block: even then odd channels of each 8. */
static const uint32_t dw_lanes[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

/* What the output stage of a block reads (the asm relies on this layout): the block's bias,
 * mult, shift and y; the lane offsets, zp, and in each lane 32 and the act range less zp. */
typedef struct {
  const int32_t *bias, *mult, *shift;
  int8_t *y;
  const uint32_t *lanes;
  int32_t zp, pad[2];
  int32_t v32[4], vlo[4], vhi[4];
} dw_blk;

#define DW_LANES(Q, K) "   vldrw.u32 " Q ", [lr, #" K "]\n"
#define DW_BIAS(Q, L)  "   vldrw.u32 " Q ", [lr, " L ", uxtw #2]\n"
#define DW_PAR(K)      "[%[par], #" K "]"
/* clang-format off */
#define DW_TAP(E, O, K)                                                                           \
  "   vldrb.s16 q0, [%[xp], #" K "]\n"                                                          \
  "   vldrb.s16 q1, [%[wp], #" K "]\n"                                                          \
  "   vadd.i16 q0, q0, %[off]\n"                                                                \
  "   vmullb.s16 q2, q0, q1\n"                                                                  \
  "   vmullt.s16 q3, q0, q1\n"                                                                  \
  "   vadd.i32 " E ", " E ", q2\n"                                                              \
  "   vadd.i32 " O ", " O ", q3\n"
#define DW_RQ(Q)                                                                                  \
  "   vldrw.u32 q0, [lr], #16\n"                                                                \
  "   vldrw.u32 q1, [%[wp], q0, uxtw #2]\n"                                                     \
  "   vldrw.u32 q2, [%[xp], q0, uxtw #2]\n"                                                     \
  "   vldrw.u32 q3, " DW_PAR("32") "\n"                                                        \
  "   vsub.i32 q1, q3, q1\n"                                                                    \
  "   vmulh.s32 q2, " Q ", q2\n"                                                                \
  "   vrshl.s32 q2, q2, q1\n"                                                                   \
  "   vldrw.u32 q3, " DW_PAR("48") "\n"                                                        \
  "   vmax.s32 q2, q2, q3\n"                                                                    \
  "   vldrw.u32 q3, " DW_PAR("64") "\n"                                                        \
  "   vmin.s32 q2, q2, q3\n"                                                                    \
  "   vadd.i32 q2, q2, %[r]\n"                                                                  \
  "   vstrb.32 q2, [%[cols], q0]\n"
/* clang-format on */
/* The parts for 16 or 8 channels: LANES and INIT (the lane offsets, then the bias at them),
 * TAPS, RQ; the constants are read from the context c. */
/* clang-format off */
#define DW_BLOCK_ASM(LANES, INIT, TAPS, RQ)                                                       \
  __asm__ volatile("   ldr lr, " DW_PAR("16") "\n" LANES "   ldr lr, " DW_PAR("0") "\n" INIT    \
                   "   cmp %[r], #0\n"                                                          \
                   "   beq 3f\n"                                                                \
                   "1: dls lr, %[cols]\n"                                                       \
                   "2:\n" TAPS "   add %[xp], %[xt]\n"                                          \
                   "   add %[wp], %[cm]\n"                                                      \
                   "   le lr, 2b\n"                                                             \
                   "   add %[xp], %[xrs]\n"                                                     \
                   "   add %[wp], %[wrs]\n"                                                     \
                   "   subs %[r], #1\n"                                                         \
                   "   bne 1b\n"                                                                \
                   "3: ldr lr, " DW_PAR("16") "\n"                                              \
                   "   ldrd %[xp], %[wp], " DW_PAR("4") "\n"                                    \
                   "   ldr %[cols], " DW_PAR("12") "\n"                                         \
                   "   ldr %[r], " DW_PAR("20") "\n" RQ                                         \
                   : [xp] "+l"(xp), [wp] "+l"(wp), [r] "+r"(r), [cols] "+r"(k)                  \
                   : [off] "r"(off), [xt] "r"(xt), [cm] "r"(cm), [xrs] "r"(xrs),                \
                     [wrs] "r"(wrs), [par] "r"(par)                                             \
                   : "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "lr", "cc", "memory")
/* clang-format on */

/* The constants of dw_blk. */
static inline void dw_blk_init(const dw_ctx *c, dw_blk *par)
{
  par->lanes = dw_lanes;
  par->zp = c->out_zp;
  for (int32_t j = 0; j < 4; j++) {
    par->v32[j] = 32;
    par->vlo[j] = c->act_min - c->out_zp;
    par->vhi[j] = c->act_max - c->out_zp;
  }
}

/* M == 1: y[0, C) of one pixel (x, w at the window's first in-bounds tap); par: the output
 * stage's constants (dw_blk_init). */
static MT_ALWAYS_INLINE void dw_pixel_mve(const dw_ctx *c, const dw_walk *kw, const int8_t *x,
                                          const int8_t *w, dw_blk *par, int8_t *y)
{
  const size_t xt = kw->xt, cm = kw->wt, xrs = kw->xrs, wrs = kw->wrs;
  const int32_t n = c->c, rows = kw->rows, cols = kw->cols, off = c->x_off;
  int32_t ch = 0;
  if (!c->rq_hi_only) { /* any shift: eight channels at a time on int32 lanes */
    for (; ch < n; ch += 8) {
      dw_tail_mve(c, kw, x + ch, w + ch, ch, n - ch < 8 ? n - ch : 8, y);
    }
    return;
  }
  for (; n - ch >= 8; ch += 16) {
    const int8_t *xp = x + ch, *wp = w + ch;
    int32_t r = rows, k = cols;
    par->bias = c->bias + ch;
    par->mult = c->mult + ch;
    par->shift = c->shift + ch;
    par->y = y + ch;
    if (n - ch < 16) { /* one block of 8 */
      DW_BLOCK_ASM(DW_LANES("q0", "0") DW_LANES("q1", "16"),
                   DW_BIAS("q4", "q0") DW_BIAS("q5", "q1"), DW_TAP("q4", "q5", "0"),
                   DW_RQ("q4") DW_RQ("q5"));
      ch += 8;
      break;
    }
    DW_BLOCK_ASM(DW_LANES("q0", "0") DW_LANES("q1", "16") DW_LANES("q2", "32") DW_LANES("q3", "48"),
                 DW_BIAS("q4", "q0") DW_BIAS("q5", "q1") DW_BIAS("q6", "q2") DW_BIAS("q7", "q3"),
                 DW_TAP("q4", "q5", "0") DW_TAP("q6", "q7", "8"),
                 DW_RQ("q4") DW_RQ("q5") DW_RQ("q6") DW_RQ("q7"));
  }
  if (ch < n) {
    dw_tail_mve(c, kw, x + ch, w + ch, ch, n - ch, y);
  }
}
#else /* !MT_MVE */
typedef struct {
  int32_t unused;
} dw_blk;
#endif /* MT_MVE */

#endif /* MT_DEPTHWISE_MVE_H */
