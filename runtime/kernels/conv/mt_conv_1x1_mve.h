/*
 * mt_conv_1x1_mve.h - the MVE (Helium) variant of the 1x1 convolution fast path
 * (mt_conv_1x1.h). Returns 1 when it computed y, 0 to leave the shape to the general path.
 *
 * Output pixels go in blocks along a row (Wo pixels taken every stride_w; with stride 1 all
 * N * H * W pixels form one row); the row's last block overlaps the one before it, or, in rows
 * shorter than a block, repeats the last pixel (the same bytes are stored twice). Per block and
 * output channel of a chunk, the dot products of Cin share each weight load (VMLADAV[A]), and
 * one output stage on four lanes (the block's pixels) uses the channel's scalar constants and
 * one scatter store (offsets 0, Cout, 2 Cout, ...):
 *   Cin <= 16   four pixels loaded once per block, per channel one weight load + 4 VMLADAV;
 *   Cin > 16    three pixels x two channels per 16-byte step (5 loads, 6 VMLADAVA).
 *
 * Per channel, a table on the stack holds base = bias + x_off * sum(w) (the dot products sum
 * raw x * w, as in mt_kernel_mac.h), mult and 31 - shift. When every shift of the chunk is >= 32
 * (every scale below 1/2), rq(acc) = rshr(VQDMULH(acc, mult), shift - 31): VQDMULH gives
 * floor(acc * mult / 2^31) exactly (mult >= 0: no saturation) and 2^(shift-1) is a multiple of
 * 2^31, so the nested floor division equals (acc * mult + 2^(shift-1)) >> shift. Those chunks
 * run the asm loops below; other chunks (and Cout 1 with Cin > 16, and -O0 builds with
 * Cin <= 16) a C loop with mt_rq_v's output stage.
 */
#ifndef MT_CONV_1X1_MVE_H
#define MT_CONV_1X1_MVE_H

#include "mt_kernel_mac.h" /* mt_wsum_rows_s8 */

#define C1X1_CHUNK 64 /* output channels per table (1 KB of stack) */

#define C1X1_PTR(a) ((const int8_t *)(uintptr_t)(a))

typedef struct {
  const int8_t *w; /* the chunk's first weight row */
  const int32_t *t; /* per channel: base, mult, 31 - shift, (unused) */
  int32_t nc, cin, cout, zp, lo, hi; /* lo, hi: act_min - zp, act_max - zp */
  int fast; /* every shift of the chunk is >= 32 */
  const mt_add_stage *add; /* conv2d_add's residual add, or NULL */
} c1x1_ctx;

/* nb blocks: the first block's pixels at x + xoff (lanes), its outputs at y + off (lanes, one
 * channel); each next block dx, dy further. */
typedef struct {
  const int8_t *x;
  int8_t *y;
  uint32x4_t xoff, off;
  int32_t nb;
  size_t dx, dy;
} c1x1_run;

#include "mt_conv_1x1_any.h" /* c1x1_any, c1x1_row_add */

/* The output stage of the asm loops, on Q (four pixels of one channel): T -> r0, r2, r4, R (base,
 * mult, 31 - shift, unused; T += 16, one LDM), clamp, + ZP, scatter store at Y, Y += 1. Note:
 * GNU as writes "vmov qd[2], qd[0], ra, rb" for lane 0 <- ra, lane 2 <- rb. */
/* clang-format off */
#define C1X1_OUT_ASM(Q, T, Y, ZP, R)      \
  "   ldm " T "!, {r0, r2, r4, " R "}\n" \
  "   vadd.i32 " Q ", " Q ", r0\n"        \
  "   vqdmulh.s32 " Q ", " Q ", r2\n"     \
  "   vrshl.s32 " Q ", r4\n"              \
  "   vmax.s32 " Q ", " Q ", %q[lo]\n"    \
  "   vmin.s32 " Q ", " Q ", %q[hi]\n"    \
  "   vadd.i32 " Q ", " Q ", " ZP "\n"    \
  "   vstrb.32 " Q ", [" Y ", %q[off]]\n" \
  "   adds " Y ", #1\n"
/* clang-format on */

#if defined(__OPTIMIZE__) /* -O0 leaves too few registers for this loop: c1x1_any instead */
#define C1X1_SMALL 1
/* A fast chunk, Cin <= 16, four pixels per block: the pixels in four registers (bytes past Cin
 * zeroed), per channel one predicated weight load and four VMLADAV. */
static MT_NOINLINE void c1x1_small(const c1x1_ctx *c, c1x1_run r)
{
  const int32x4_t lo = vdupq_n_s32(c->lo), hi = vdupq_n_s32(c->hi);
  const size_t o1 = vgetq_lane_u32(r.xoff, 1), o2 = vgetq_lane_u32(r.xoff, 2);
  const size_t o3 = vgetq_lane_u32(r.xoff, 3); /* lane 0 is 0 */
  for (; r.nb > 0; r.nb--, r.x += r.dx, r.y += r.dy) {
    const int8_t *w = c->w;
    const int32_t *t = c->t;
    int8_t *y = r.y;
    int8x16_t v0, v1, v2, v3;
    /* clang-format off */
    __asm__ volatile("vctp.8 %[cin]\n"
                     "vpstttt\n"
                     "vldrbt.8 %q[v0], [%[x0]]\n"
                     "vldrbt.8 %q[v1], [%[x1]]\n"
                     "vldrbt.8 %q[v2], [%[x2]]\n"
                     "vldrbt.8 %q[v3], [%[x3]]\n"
                     : [v0] "=&w"(v0), [v1] "=&w"(v1), [v2] "=&w"(v2), [v3] "=&w"(v3)
                     : [x0] "r"(r.x), [x1] "r"(r.x + o1), [x2] "r"(r.x + o2), [x3] "r"(r.x + o3),
                       [cin] "r"(c->cin)
                     : "memory");
    __asm__ volatile("   vctp.8 %[cin]\n" /* P0 (VPR, which calls do not preserve): Cin lanes */
                     "   dls lr, %[nc]\n"
                     "1: vpst\n"
                     "   vldrbt.8 q2, [%[w]]\n"
                     "   add %[w], %[cin]\n"
                     "   vmladav.s8 r0, %q[x0], q2\n"
                     "   vmladav.s8 r2, %q[x1], q2\n"
                     "   vmladav.s8 r4, %q[x2], q2\n"
                     "   vmladav.s8 r6, %q[x3], q2\n"
                     "   vmov q2[2], q2[0], r0, r4\n"
                     "   vmov q2[3], q2[1], r2, r6\n"
                     C1X1_OUT_ASM("q2", "%[t]", "%[y]", "%[zp]", "r6")
                     "   le lr, 1b\n"
                     : [w] "+r"(w), [t] "+r"(t), [y] "+r"(y)
                     : [x0] "w"(v0), [x1] "w"(v1), [x2] "w"(v2), [x3] "w"(v3), [cin] "r"(c->cin),
                       [nc] "r"(c->nc), [lo] "w"(lo), [hi] "w"(hi), [zp] "r"(c->zp),
                       [off] "w"(r.off)
                     : "r0", "r2", "r4", "r6", "q2", "lr", "memory");
    /* clang-format on */
  }
}

#else /* !__OPTIMIZE__ */
#define C1X1_SMALL 0
#define c1x1_small c1x1_any
#endif /* __OPTIMIZE__ */

/* A fast chunk, Cin > 16, nc >= 2, three pixels per block: pairs of channels, each 16-byte step
 * two weight loads and three pixel loads for six VMLADAVA; odd nc: the last pair is (nc - 2,
 * nc - 1). m (read by the asm): the pixel addresses (0..2), Cin - 16 (4), the step from the
 * weight pointers after a pair to the next pair, 2 Cin - 16 * ceil(Cin / 16) (5), the table's
 * end (6), t and y (7, 8). */
static MT_NOINLINE void c1x1_wide(const c1x1_ctx *c, c1x1_run r)
{
  const int32x4_t lo = vdupq_n_s32(c->lo), hi = vdupq_n_s32(c->hi), zp = vdupq_n_s32(c->zp);
  const int32_t nc = c->nc;
  const size_t cin = (size_t)c->cin;
  uint32_t m[9];
  m[4] = (uint32_t)(cin - 16);
  m[5] = (uint32_t)(2 * cin - (cin + 15) / 16 * 16);
  for (; r.nb > 0; r.nb--, r.x += r.dx, r.y += r.dy) {
    vst1q_u32(m, vaddq_n_u32(r.xoff, (uint32_t)(uintptr_t)r.x));
    for (int32_t o = 0, np = nc / 2; np > 0; np = o == 0 && (nc & 1), o = nc - 2) {
      m[6] = (uint32_t)(uintptr_t)(c->t + 4 * o + 8 * np);
      m[7] = (uint32_t)(uintptr_t)(c->t + 4 * o);
      m[8] = (uint32_t)(uintptr_t)(r.y + o);
      register uint32_t *m_r __asm__("r12") = m;
      register const int8_t *wa __asm__("r9") = c->w + (size_t)o * cin;
      register const int8_t *wb __asm__("r11") = c->w + (size_t)(o + 1) * cin;
      /* clang-format off */
      __asm__ volatile("2: ldm %[m], {r1, r3, r5}\n"
                       "   vldrb.8 q0, [%[wa]], #16\n"
                       "   vldrb.8 q1, [%[wb]], #16\n"
                       "   vldrb.8 q2, [r1], #16\n"
                       "   vmladav.s8 r0, q2, q0\n"
                       "   vmladav.s8 r6, q2, q1\n"
                       "   vldrb.8 q2, [r3], #16\n"
                       "   vmladav.s8 r2, q2, q0\n"
                       "   vmladav.s8 r8, q2, q1\n"
                       "   vldrb.8 q2, [r5], #16\n"
                       "   vmladav.s8 r4, q2, q0\n"
                       "   vmladav.s8 r10, q2, q1\n"
                       "   ldr lr, [%[m], #16]\n"
                       "   dlstp.8 lr, lr\n"
                       "1: vldrb.8 q0, [%[wa]], #16\n"
                       "   vldrb.8 q1, [%[wb]], #16\n"
                       "   vldrb.8 q2, [r1], #16\n"
                       "   vmladava.s8 r0, q2, q0\n"
                       "   vmladava.s8 r6, q2, q1\n"
                       "   vldrb.8 q2, [r3], #16\n"
                       "   vmladava.s8 r2, q2, q0\n"
                       "   vmladava.s8 r8, q2, q1\n"
                       "   vldrb.8 q2, [r5], #16\n"
                       "   vmladava.s8 r4, q2, q0\n"
                       "   vmladava.s8 r10, q2, q1\n"
                       "   letp lr, 1b\n"
                       "   vmov q2[2], q2[0], r0, r4\n" /* lane 3 repeats pixel 2 */
                       "   vmov q2[3], q2[1], r2, r4\n"
                       "   vmov q3[2], q3[0], r6, r10\n"
                       "   vmov q3[3], q3[1], r8, r10\n"
                       "   ldrd r6, r8, [%[m], #28]\n"
                       C1X1_OUT_ASM("q2", "r6", "r8", "%q[zp]", "r10")
                       C1X1_OUT_ASM("q3", "r6", "r8", "%q[zp]", "r10")
                       "   ldrd r0, r2, [%[m], #20]\n"
                       "   strd r6, r8, [%[m], #28]\n"
                       "   add %[wa], %[wa], r0\n"
                       "   add %[wb], %[wb], r0\n"
                       "   cmp r6, r2\n"
                       "   bne 2b\n"
                       : [wa] "+r"(wa), [wb] "+r"(wb)
                       : [m] "r"(m_r), [lo] "w"(lo), [hi] "w"(hi), [zp] "w"(zp), [off] "w"(r.off)
                       : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r10", "q0", "q1", "q2",
                         "q3", "lr", "cc", "memory");
      /* clang-format on */
    }
  }
}

/* One row of len output pixels: x its first input pixel, sx bytes between its pixels. */
static void c1x1_row(const c1x1_ctx *c, const int8_t *x, size_t sx, int32_t len, int8_t *y)
{
  if (c->add != NULL) {
    c1x1_row_add(c, x, sx, len, y);
    return;
  }
  const int wide = c->fast && c->cin > 16 && c->nc >= 2;
  const int32_t px = wide ? 3 : 4, nb = len / px; /* pixels per block, whole blocks */
  const uint32x4_t lanes =
      vminq_u32(vidupq_n_u32(0, 1), vdupq_n_u32((uint32_t)(len < px ? len : px) - 1u));
  c1x1_run r = {x,
                y,
                vmulq_n_u32(lanes, (uint32_t)sx),
                vmulq_n_u32(lanes, (uint32_t)c->cout),
                nb > 0 ? nb : 1,
                (size_t)px * sx,
                (size_t)px * (size_t)c->cout};
  for (int k = 0; k < 2; k++) { /* the whole blocks, then the last one overlapping */
    if (wide) {
      c1x1_wide(c, r);
    } else if (C1X1_SMALL && c->fast && c->cin <= 16) {
      c1x1_small(c, r);
    } else {
      c1x1_any(c, r);
    }
    if (len <= px || len % px == 0) {
      break;
    }
    r.x = x + (size_t)(len - px) * sx;
    r.y = y + (size_t)(len - px) * (size_t)c->cout;
    r.nb = 1;
  }
}

/* The chunk's table (four channels per step); returns 1 when every shift is >= 32. */
static int c1x1_table(const mt_conv1x1 *p, int32_t c0, int32_t nc, int32_t *t)
{
  uint32_t sum[C1X1_CHUNK];
  mve_pred16_t slow = 0;
  for (int32_t o = 0; o < nc; o++) {
    sum[o] = 0;
  }
  mt_wsum_rows_s8(p->w + (size_t)c0 * (size_t)p->cin, (size_t)p->cin, (uint32_t)p->cin, nc, sum);
  for (int32_t o = 0; o < nc; o += 4) { /* o + 3 < C1X1_CHUNK: whole entries stay in t */
    const mve_pred16_t q = vctp32q((uint32_t)(nc - o));
    const int32x4_t sh = vldrwq_z_s32(p->shift + c0 + o, q);
    int32x4x4_t e;
    e.val[0] = vmlaq_n_s32(vldrwq_z_s32(p->bias + c0 + o, q),
                           vldrwq_z_s32((const int32_t *)sum + o, q), p->x_off);
    e.val[1] = vldrwq_z_s32(p->mult + c0 + o, q);
    e.val[2] = vsubq_s32(vdupq_n_s32(31), sh);
    e.val[3] = e.val[2];
    vst4q_s32(t + 4 * o, e);
    slow |= vcmpltq_m_n_s32(sh, 32, q);
  }
  return slow == 0;
}

static int conv1x1_mve(const mt_conv1x1 *p)
{
  int32_t tab[4 * C1X1_CHUNK];
  /* rows: all pixels (stride 1), the columns of each image (Wo 1), or the rows of Wo pixels */
  const int flat = p->stride_h == 1 && p->stride_w == 1, column = !flat && p->wo == 1;
  const int64_t pixels = (int64_t)p->batch * p->ho * p->wo;
  if (p->cin < 1 || pixels > MT_DIM_MAX) {
    return 0;
  }
  const int32_t rows = flat ? 1 : column ? p->batch : p->batch * p->ho;
  const int32_t len = flat ? (int32_t)pixels : column ? p->ho : p->wo;
  const size_t sx =
      (column ? (size_t)p->stride_h * (size_t)p->w_in : (size_t)p->stride_w) * (size_t)p->cin;
  if (len < 3) { /* blocks would mostly repeat pixels: the general path does better */
    return 0;
  }
  c1x1_ctx c = {
      NULL, tab,   0, p->cin, p->cout, p->out_zp, p->act_min - p->out_zp, p->act_max - p->out_zp,
      0,    p->add};
  for (int32_t c0 = 0; c0 < p->cout; c0 += C1X1_CHUNK) {
    c.nc = p->cout - c0 < C1X1_CHUNK ? p->cout - c0 : C1X1_CHUNK;
    c.fast = c1x1_table(p, c0, c.nc, tab);
    c.w = p->w + (size_t)c0 * (size_t)p->cin;
    for (int32_t r = 0; r < rows; r++) {
      const int32_t n = column ? r : r / p->ho, oh = column ? 0 : r % p->ho;
      const size_t ix =
          ((size_t)n * (size_t)p->h + (size_t)oh * (size_t)p->stride_h) * (size_t)p->w_in;
      c1x1_row(&c, p->x + ix * (size_t)p->cin, sx, len,
               p->y + (size_t)r * (size_t)len * (size_t)p->cout + (size_t)c0);
    }
  }
  return 1;
}

#endif /* MT_CONV_1X1_MVE_H */
