/*
 * mt_conv_1x1_any.h - the intrinsics loop of the MVE 1x1 path (mt_conv_1x1_mve.h) for any chunk,
 * four pixels per block, and the rows of conv2d_add's 1x1 convs, which all take this loop: its
 * output stage adds the residual (mt_kernel_add.h) between the clamp and the scatter store; the
 * asm loops (c1x1_small, c1x1_wide) have no registers left for it. Included by
 * mt_conv_1x1_mve.h after c1x1_ctx and c1x1_run.
 */
#ifndef MT_CONV_1X1_ANY_H
#define MT_CONV_1X1_ANY_H

#include "mt_kernel_add_stage.h"

/* Any chunk, four pixels per block: per channel, a tail-predicated dot loop over Cin, then
 * mt_rq_v's output stage. */
static MT_NOINLINE void c1x1_any(const c1x1_ctx *c, c1x1_run r)
{
  for (; r.nb > 0; r.nb--, r.x += r.dx, r.y += r.dy) {
    const uint32x4_t a = vaddq_n_u32(r.xoff, (uint32_t)(uintptr_t)r.x);
    const int8_t *w = c->w;
    const int32_t *t = c->t;
    for (int32_t o = 0; o < c->nc; o++, w += c->cin, t += 4) {
      const int8_t *x0 = C1X1_PTR(vgetq_lane_u32(a, 0)), *x1 = C1X1_PTR(vgetq_lane_u32(a, 1));
      const int8_t *x2 = C1X1_PTR(vgetq_lane_u32(a, 2)), *x3 = C1X1_PTR(vgetq_lane_u32(a, 3));
      int32x4_t v = mt_dot4_mve(w, x0, x1, x2, x3, (uint32_t)c->cin);
      v = vaddq_n_s32(v, t[0]);
      v = mt_rq_n_v(v, t[1], 31 - t[2]); /* t[2] = 31 - shift */
      v = vminq_s32(vmaxq_s32(v, vdupq_n_s32(c->lo)), vdupq_n_s32(c->hi));
      if (c->add != NULL) { /* skip's bytes gathered before y's are stored over them */
        const int8_t *skip = mt_add_skip(c->add, r.y + o);
        v = mt_add_stage_v(c->add, v, vldrbq_gather_offset_s32(skip, r.off));
      } else {
        v = vaddq_n_s32(v, c->zp);
      }
      vstrbq_scatter_offset_s32(r.y + o, r.off, v);
    }
  }
}

/* c1x1_row with the residual add: whole blocks of four, then the rest as one block repeating
 * its last pixel (none overlaps another: a pixel stored twice would read a spent skip). */
static void c1x1_row_add(const c1x1_ctx *c, const int8_t *x, size_t sx, int32_t len, int8_t *y)
{
  const size_t cout = (size_t)c->cout;
  for (int32_t done = 0, n; done < len; done += n) {
    n = done == 0 && len >= 4 ? len / 4 * 4 : len - done;
    const uint32x4_t lanes = vminq_u32(vidupq_n_u32(0, 1), vdupq_n_u32(n < 4 ? n - 1 : 3));
    const c1x1_run r = {x + (size_t)done * sx,
                        y + (size_t)done * cout,
                        vmulq_n_u32(lanes, sx),
                        vmulq_n_u32(lanes, cout),
                        n < 4 ? 1 : n / 4,
                        4 * sx,
                        4 * cout};
    c1x1_any(c, r);
  }
}

#endif /* MT_CONV_1X1_ANY_H */
