/*
 * mt_conv_1x1_mve.h - the MVE (Helium) variant of the 1x1 convolution fast path
 * (mt_conv_1x1.h). Returns 1 when it computed y, 0 to leave the shape to the general path.
 *
 * Output pixels go in blocks of four along a row (Wo pixels taken every stride_w; with stride 1
 * all N * H * W pixels form one row). Per block, each output channel of a chunk is four dot
 * products of Cin (VMLADAV[A]: one weight load feeds the four pixels) and one output stage on
 * four lanes with the channel's scalar constants, stored by one scatter store (offsets 0, Cout,
 * 2 Cout, 3 Cout). A row's last block repeats its last pixel (the same bytes are stored twice).
 * Cin <= 16: the block's pixels are loaded once and stay in registers; Cin > 16: a first
 * 16-byte step, then a tail-predicated loop over the rest of Cin, per channel.
 *
 * Per channel, a table on the stack holds base = bias + x_off * sum(w) (the dot products sum
 * raw x * w, as in mt_kernel_mac.h), mult and 31 - shift. When every shift of the chunk is >= 32
 * (every scale below 1/2), rq(acc) = rshr(VQDMULH(acc, mult), shift - 31): VQDMULH gives
 * floor(acc * mult / 2^31) exactly (mult >= 0: no saturation) and 2^(shift-1) is a multiple of
 * 2^31, so the nested floor division equals (acc * mult + 2^(shift-1)) >> shift. Those chunks
 * run the asm loops below; other chunks a C loop with mt_rq_v's split form.
 */
#ifndef MT_CONV_1X1_MVE_H
#define MT_CONV_1X1_MVE_H

#include "mt_kernel_mac.h" /* mt_wsum_rows_s8 */

#define C1X1_CHUNK 64 /* output channels per table (768 B of stack) */

typedef struct {
  const int8_t *w;  /* the chunk's first weight row */
  const int32_t *t; /* per channel: base, mult, 31 - shift */
  int32_t nc, cin, cout, zp, lo, hi; /* lo, hi: act_min - zp, act_max - zp */
  int fast;         /* every shift of the chunk is >= 32 */
} c1x1_ctx;

/* Any chunk: per channel, a tail-predicated dot loop over Cin, then mt_rq_v's output stage. */
static void c1x1_any(const c1x1_ctx *c, const int8_t *const xp[4], uint32x4_t off, int8_t *y)
{
  const int8_t *w = c->w;
  const int32_t *t = c->t;
  for (int32_t o = 0; o < c->nc; o++, w += c->cin, t += 3) {
    const int8_t *x0 = xp[0], *x1 = xp[1], *x2 = xp[2], *x3 = xp[3], *wr = w;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    __asm__ volatile("   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[w]], #16\n"
                     "   vldrb.8 q1, [%[x0]], #16\n"
                     "   vmladava.s8 %[s0], q0, q1\n"
                     "   vldrb.8 q1, [%[x1]], #16\n"
                     "   vmladava.s8 %[s1], q0, q1\n"
                     "   vldrb.8 q1, [%[x2]], #16\n"
                     "   vmladava.s8 %[s2], q0, q1\n"
                     "   vldrb.8 q1, [%[x3]], #16\n"
                     "   vmladava.s8 %[s3], q0, q1\n"
                     "   letp lr, 1b\n"
                     : [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2), [x3] "+r"(x3), [w] "+r"(wr),
                       [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3)
                     : [n] "r"(c->cin)
                     : "q0", "q1", "lr", "memory");
    int32x4_t v = vsetq_lane_s32(s3, vsetq_lane_s32(s2, vsetq_lane_s32(s1, vdupq_n_s32(s0), 1),
                                                    2), 3);
    v = vaddq_n_s32(v, t[0]);
    const uint32x4_t l = vrshlq_n_u32(vreinterpretq_u32_s32(vmulq_n_s32(v, t[1])), t[2] - 31);
    v = vaddq_s32(vrshlq_n_s32(vmulhq_s32(v, vdupq_n_s32(t[1])), t[2] + 1),
                  vreinterpretq_s32_u32(l));
    v = vaddq_n_s32(vminq_s32(vmaxq_s32(v, vdupq_n_s32(c->lo)), vdupq_n_s32(c->hi)), c->zp);
    vstrbq_scatter_offset_s32(y + o, off, v);
  }
}

/* The output stage of the asm loops, on q2 (four pixels of one channel): t -> r0, r2, r4 (base,
 * mult, 31 - shift; t += 12), clamp, + zp, scatter store at y, y += 1. Note: GNU as writes
 * "vmov qd[2], qd[0], ra, rb" for lane 0 <- ra, lane 2 <- rb. */
#define C1X1_OUT_ASM                           \
  "   ldrd r0, r2, [%[t]], #12\n"              \
  "   ldr r4, [%[t], #-4]\n"                   \
  "   vadd.i32 q2, q2, r0\n"                   \
  "   vqdmulh.s32 q2, q2, r2\n"                \
  "   vrshl.s32 q2, r4\n"                      \
  "   vmax.s32 q2, q2, %q[lo]\n"               \
  "   vmin.s32 q2, q2, %q[hi]\n"               \
  "   vadd.i32 q2, q2, %[zp]\n"               \
  "   vstrb.32 q2, [%[y], %q[off]]\n"          \
  "   adds %[y], #1\n"

/* A fast chunk, Cin <= 16: the pixels in four registers (bytes past Cin zeroed), per channel
 * one predicated weight load and four VMLADAV. */
static MT_ALWAYS_INLINE void c1x1_small(const c1x1_ctx *c, const int8_t *const xp[4],
                                        uint32x4_t off, int32x4_t lo, int32x4_t hi, int8_t *y)
{
  const mve_pred16_t p = vctp8q((uint32_t)c->cin);
  const int8_t *w = c->w;
  const int32_t *t = c->t;
  int8x16_t x0, x1, x2, x3;
  __asm__("vpstttt\n"
          "vldrbt.8 %q[x0], [%[p0]]\n"
          "vldrbt.8 %q[x1], [%[p1]]\n"
          "vldrbt.8 %q[x2], [%[p2]]\n"
          "vldrbt.8 %q[x3], [%[p3]]\n"
          : [x0] "=&w"(x0), [x1] "=&w"(x1), [x2] "=&w"(x2), [x3] "=&w"(x3)
          : [p0] "r"(xp[0]), [p1] "r"(xp[1]), [p2] "r"(xp[2]), [p3] "r"(xp[3]), [p] "Up"(p),
            "m"(*(const int8_t(*)[16])xp[0]), "m"(*(const int8_t(*)[16])xp[1]),
            "m"(*(const int8_t(*)[16])xp[2]), "m"(*(const int8_t(*)[16])xp[3]));
  __asm__ volatile("   dls lr, %[nc]\n"
                   "1: vpst\n"
                   "   vldrbt.8 q2, [%[w]]\n"
                   "   add %[w], %[cin]\n"
                   "   vmladav.s8 r0, %q[x0], q2\n"
                   "   vmladav.s8 r2, %q[x1], q2\n"
                   "   vmladav.s8 r4, %q[x2], q2\n"
                   "   vmladav.s8 r6, %q[x3], q2\n"
                   "   vmov q2[2], q2[0], r0, r4\n"
                   "   vmov q2[3], q2[1], r2, r6\n" C1X1_OUT_ASM
                   "   le lr, 1b\n"
                   : [w] "+r"(w), [t] "+r"(t), [y] "+r"(y)
                   : [x0] "w"(x0), [x1] "w"(x1), [x2] "w"(x2), [x3] "w"(x3), [cin] "r"(c->cin),
                     [nc] "r"(c->nc), [p] "Up"(p), [lo] "w"(lo), [hi] "w"(hi), [zp] "r"(c->zp),
                     [off] "w"(off)
                   : "r0", "r2", "r4", "r6", "q2", "lr", "memory");
}

/* A fast chunk, Cin > 16. blk: the four pixel addresses, Cin - 16, the weight pointer's
 * overshoot per row (16 * ceil(Cin / 16) - Cin), the table's end. */
static MT_ALWAYS_INLINE void c1x1_large(const c1x1_ctx *c, const uintptr_t *blk,
                                        uint32x4_t off, int32x4_t lo, int32x4_t hi, int8_t *y)
{
  register const uintptr_t *b_r __asm__("r12") = blk;
  register const int8_t *w_r __asm__("r9") = c->w;
  register const int32_t *t_r __asm__("r10") = c->t;
  register int8_t *y_r __asm__("r11") = y;
  __asm__ volatile("2: ldm %[b], {r1, r3, r5, r8}\n"
                   "   vldrb.8 q0, [%[w]], #16\n"
                   "   vldrb.8 q1, [r1], #16\n"
                   "   vmladav.s8 r0, q0, q1\n"
                   "   vldrb.8 q1, [r3], #16\n"
                   "   vmladav.s8 r2, q0, q1\n"
                   "   vldrb.8 q1, [r5], #16\n"
                   "   vmladav.s8 r4, q0, q1\n"
                   "   vldrb.8 q1, [r8], #16\n"
                   "   vmladav.s8 r6, q0, q1\n"
                   "   ldr lr, [%[b], #16]\n"
                   "   dlstp.8 lr, lr\n"
                   "1: vldrb.8 q0, [%[w]], #16\n"
                   "   vldrb.8 q1, [r1], #16\n"
                   "   vmladava.s8 r0, q0, q1\n"
                   "   vldrb.8 q1, [r3], #16\n"
                   "   vmladava.s8 r2, q0, q1\n"
                   "   vldrb.8 q1, [r5], #16\n"
                   "   vmladava.s8 r4, q0, q1\n"
                   "   vldrb.8 q1, [r8], #16\n"
                   "   vmladava.s8 r6, q0, q1\n"
                   "   letp lr, 1b\n"
                   "   vmov q2[2], q2[0], r0, r4\n"
                   "   vmov q2[3], q2[1], r2, r6\n" C1X1_OUT_ASM
                   "   ldrd r0, r2, [%[b], #20]\n"
                   "   sub %[w], %[w], r0\n"
                   "   cmp %[t], r2\n"
                   "   bne 2b\n"
                   : [w] "+r"(w_r), [t] "+r"(t_r), [y] "+r"(y_r)
                   : [b] "r"(b_r), [lo] "w"(lo), [hi] "w"(hi), [zp] "r"(c->zp), [off] "w"(off)
                   : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "q0", "q1", "q2", "lr", "cc",
                     "memory");
}

/* One row of len output pixels: x its first input pixel, sx bytes between its pixels. */
static MT_NOINLINE void c1x1_row(const c1x1_ctx *c, const int8_t *x, size_t sx, int32_t len,
                                 int8_t *y)
{
  const int32x4_t lo = vdupq_n_s32(c->lo), hi = vdupq_n_s32(c->hi);
  const uint32_t cout = (uint32_t)c->cout;
  const uint32x4_t ramp = vidupq_n_u32(0, 1), off4 = vmulq_n_u32(ramp, cout);
  const int fast = c->fast, small = c->cin <= 16;
  uintptr_t blk[7];
  blk[4] = (uintptr_t)(c->cin - 16);
  blk[5] = (uintptr_t)((c->cin + 15) / 16 * 16 - c->cin);
  blk[6] = (uintptr_t)(c->t + 3 * c->nc);
  for (int32_t i = 0; i < len; i += 4) {
    int32_t s = i;
    uint32_t last = 3; /* the block's pixels: s .. s + last, then repeats of the last one */
    if (len - i < 4) { /* the row's end: overlap the previous block, or repeat the last pixel */
      s = len >= 4 ? len - 4 : 0;
      last = len >= 4 ? 3u : (uint32_t)len - 1u;
    }
    const int8_t *xp[4];
    for (uint32_t j = 0; j < 4; j++) {
      xp[j] = x + ((size_t)s + (j < last ? j : last)) * sx;
      blk[j] = (uintptr_t)xp[j];
    }
    const uint32x4_t off = last == 3 ? off4 : vmulq_n_u32(vminq_u32(ramp, vdupq_n_u32(last)), cout);
    int8_t *yb = y + (size_t)s * cout;
    if (!fast) {
      c1x1_any(c, xp, off, yb);
    } else if (small) {
      c1x1_small(c, xp, off, lo, hi, yb);
    } else {
      c1x1_large(c, blk, off, lo, hi, yb);
    }
  }
}

/* The chunk's table; returns 1 when every shift is >= 32. */
static int c1x1_table(const mt_conv1x1 *p, int32_t c0, int32_t nc, int32_t *t)
{
  uint32_t sum[C1X1_CHUNK];
  int fast = 1;
  for (int32_t o = 0; o < nc; o++) {
    sum[o] = 0;
  }
  mt_wsum_rows_s8(p->w + (size_t)c0 * (size_t)p->cin, (size_t)p->cin, (uint32_t)p->cin, nc, sum);
  for (int32_t o = 0; o < nc; o++, t += 3) {
    t[0] = mt_wrap_s32((uint32_t)p->bias[c0 + o] + (uint32_t)p->x_off * sum[o]);
    t[1] = p->mult[c0 + o];
    t[2] = 31 - p->shift[c0 + o];
    fast &= p->shift[c0 + o] >= 32;
  }
  return fast;
}

static int conv1x1_mve(const mt_conv1x1 *p)
{
  int32_t tab[3 * C1X1_CHUNK];
  const int flat = p->stride_h == 1 && p->stride_w == 1; /* all pixels in one row */
  const int64_t pixels = (int64_t)p->batch * p->ho * p->wo;
  const int32_t rows = flat ? 1 : p->batch * p->ho;
  const int32_t len = flat ? (int32_t)pixels : p->wo;
  const size_t sx = (size_t)p->stride_w * (size_t)p->cin;
  if (p->cin < 1 || pixels < 1 || pixels > MT_DIM_MAX) {
    return 0;
  }
  c1x1_ctx c = {NULL, tab, 0, p->cin, p->cout, p->out_zp, p->act_min - p->out_zp,
                p->act_max - p->out_zp, 0};
  for (int32_t c0 = 0; c0 < p->cout; c0 += C1X1_CHUNK) {
    c.nc = p->cout - c0 < C1X1_CHUNK ? p->cout - c0 : C1X1_CHUNK;
    c.fast = c1x1_table(p, c0, c.nc, tab);
    c.w = p->w + (size_t)c0 * (size_t)p->cin;
    for (int32_t r = 0; r < rows; r++) {
      const int32_t n = r / p->ho, oh = r % p->ho;
      const size_t ix = ((size_t)n * (size_t)p->h + (size_t)oh * (size_t)p->stride_h) *
                        (size_t)p->w_in;
      c1x1_row(&c, p->x + ix * (size_t)p->cin, sx, len,
               p->y + (size_t)r * (size_t)len * (size_t)p->cout + (size_t)c0);
    }
  }
  return 1;
}

#endif /* MT_CONV_1X1_MVE_H */
