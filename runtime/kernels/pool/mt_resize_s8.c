/*
 * mt_resize_s8.c - resampling on TOSA RESIZE's integer coordinates (ref/pool.py resize). Per
 * axis, output o reads v = o * scale_d + offset in units of 1/scale_n: i = floor(v / scale_n),
 * r = v - i * scale_n, taps clamp(i) and clamp(i + 1) into the input. nearest copies the pixel
 * (i + (2 r >= n)) per axis: a run of C bytes (memcpy), and a whole output row again when it
 * reads the same input row as the one before. bilinear sums the four taps weighted (n - r) or r
 * per axis (|acc| <= 128 * 2^22) and requantizes by mult / 2^shift ~ 1 / (n_y * n_x): y shares
 * x's qparams, so no zero point enters. MVE: 4 channels per step (VLDRB-widened taps into one
 * int32x4 sum, requantized on the vector, the tail predicated) and nearest copies 16 bytes
 * per vector; DSP adds nothing here (the 22-bit weights do not fit SMLAD's 16-bit lanes); C:
 * memcpy runs (nearest) and one channel at a time (bilinear).
 */
#include <string.h>

#include "mt_kernel_isa.h"
#include "mt_kernel_mve.h"
#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define RS_MAX_N      (1 << 11) /* TOSA's bound on scale_n */
#define RS_MAX_D      (1 << 14) /* o * scale_d + offset stays an int32 */
#define RS_MAX_OFFSET (1 << 16)
#define RS_MAX_DIM    0xFFFF

/* One axis: the coordinate of output 0 and its step, both as (index, remainder). */
typedef struct {
  int32_t n, size, i, r, di, dr;
} rs_axis;

/* The axis from attributes at[k..k+3] = (scale_n, scale_d, offset, border); 0 outside the domain
 * (ref/pool.py _resize_axis: the same checks in the same terms). */
static int rs_axis_init(rs_axis *ax, uint32_t size, uint32_t out, const int32_t *at)
{
  const int32_t n = at[0], d = at[1], offset = at[2], border = at[3];
  if (n < 1 || n > RS_MAX_N || d < 1 || d > RS_MAX_D || offset < -RS_MAX_OFFSET ||
      offset > RS_MAX_OFFSET || size < 1 || size > RS_MAX_DIM || out < 1 || out > RS_MAX_DIM) {
    return 0;
  }
  if ((int64_t)(size - 1) * n - offset + border != (int64_t)(out - 1) * d) {
    return 0;
  }
  ax->n = n;
  ax->size = (int32_t)size;
  ax->i = offset >= 0 ? offset / n : -((n - 1 - offset) / n); /* floor */
  ax->r = offset - ax->i * n;
  ax->di = d / n;
  ax->dr = d % n;
  return 1;
}

static void rs_step(rs_axis *ax)
{
  ax->i += ax->di;
  ax->r += ax->dr;
  if (ax->r >= ax->n) {
    ax->r -= ax->n;
    ax->i++;
  }
}

static int32_t rs_clamp(int32_t i, int32_t size)
{
  return i < 0 ? 0 : (i >= size ? size - 1 : i);
}

/* nearest: clamp(i) or clamp(i + 1) */
static int32_t rs_nearest(const rs_axis *ax)
{
  return rs_clamp(2 * ax->r >= ax->n ? ax->i + 1 : ax->i, ax->size);
}

typedef struct {
  const int8_t *x;
  int8_t *y;
  uint32_t h, w, c, oh, ow;
  int32_t mult, shift, lo, hi;
} rs_ctx;

/* One pixel's c channels, clamped. MVE: 16 per vector (the tail predicated), no call. */
static void rs_copy(int8_t *dst, const int8_t *src, int32_t c, int32_t lo, int32_t hi)
{
#if MT_MVE
  const int8x16_t vlo = vdupq_n_s8((int8_t)lo), vhi = vdupq_n_s8((int8_t)hi);
  for (int32_t k = 0; k < c; k += 16) {
    const mve_pred16_t p = vctp8q((uint32_t)(c - k));
    vstrbq_p_s8(dst + k, vminq_s8(vmaxq_s8(vldrbq_z_s8(src + k, p), vlo), vhi), p);
  }
  return;
#endif /* MT_MVE */
  if (lo == MT_S8_MIN && hi == MT_S8_MAX) {
    memcpy(dst, src, (size_t)c);
    return;
  }
  for (int32_t k = 0; k < c; k++) {
    dst[k] = (int8_t)(src[k] < lo ? lo : (src[k] > hi ? hi : src[k]));
  }
}

static void rs_nearest_image(const rs_ctx *s, rs_axis ay, const rs_axis *ax0, const int8_t *x,
                             int8_t *y)
{
  const int32_t c = (int32_t)s->c, row = (int32_t)(s->ow * s->c);
  int32_t prev = -1;
  for (uint32_t oy = 0; oy < s->oh; oy++, rs_step(&ay), y += row) {
    const int32_t iy = rs_nearest(&ay);
    if (iy == prev) { /* the same input row: the same output row */
      memcpy(y, y - row, (size_t)row);
      continue;
    }
    prev = iy;
    rs_axis ax = *ax0;
    const int8_t *src = x + (size_t)iy * s->w * s->c;
    for (uint32_t ox = 0; ox < s->ow; ox++, rs_step(&ax)) {
      rs_copy(y + (size_t)ox * s->c, src + (size_t)rs_nearest(&ax) * s->c, c, s->lo, s->hi);
    }
  }
}

/* One output pixel of bilinear: taps t00, t01 (row 0), t10, t11 (row 1), weights w[4]. */
static void rs_pixel(const rs_ctx *s, const int8_t *const t[4], const int32_t w[4], int8_t *y)
{
  const int32_t c = (int32_t)s->c;
  int32_t k = 0;
#if MT_MVE
  const int32x4_t sh_hi = vdupq_n_s32(32 - s->shift), sh_lo = vdupq_n_s32(-s->shift);
  const int32x4_t mult = vdupq_n_s32(s->mult);
  for (; k < c; k += 4) {
    const mve_pred16_t p = vctp32q((uint32_t)(c - k));
    int32x4_t acc = vmulq_n_s32(vldrbq_z_s32(t[0] + k, p), w[0]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(t[1] + k, p), w[1]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(t[2] + k, p), w[2]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(t[3] + k, p), w[3]);
    vstrbq_p_s32(y + k, mt_requantize_v(acc, mult, sh_hi, sh_lo, 0, s->lo, s->hi), p);
  }
#endif /* MT_MVE */
  for (; k < c; k++) {
    const int32_t acc = t[0][k] * w[0] + t[1][k] * w[1] + t[2][k] * w[2] + t[3][k] * w[3];
    y[k] = mt_requantize(acc, s->mult, s->shift, 0, s->lo, s->hi);
  }
}

static void rs_bilinear_image(const rs_ctx *s, rs_axis ay, const rs_axis *ax0, const int8_t *x,
                              int8_t *y)
{
  const size_t row = (size_t)s->w * s->c;
  for (uint32_t oy = 0; oy < s->oh; oy++, rs_step(&ay)) {
    const int8_t *r0 = x + (size_t)rs_clamp(ay.i, ay.size) * row;
    const int8_t *r1 = x + (size_t)rs_clamp(ay.i + 1, ay.size) * row;
    const int32_t wy1 = ay.r, wy0 = ay.n - ay.r;
    rs_axis ax = *ax0;
    for (uint32_t ox = 0; ox < s->ow; ox++, rs_step(&ax), y += s->c) {
      const size_t c0 = (size_t)rs_clamp(ax.i, ax.size) * s->c;
      const size_t c1 = (size_t)rs_clamp(ax.i + 1, ax.size) * s->c;
      const int32_t wx1 = ax.r, wx0 = ax.n - ax.r;
      const int8_t *const t[4] = {r0 + c0, r0 + c1, r1 + c0, r1 + c1};
      const int32_t w[4] = {wy0 * wx0, wy0 * wx1, wy1 * wx0, wy1 * wx1};
      rs_pixel(s, t, w, y);
    }
  }
}

/* Operands and attributes (ref/pool.py resize's domain); 1 when supported. */
static int rs_init(rs_ctx *s, rs_axis *ay, rs_axis *ax, const mt_op_args *a)
{
  const mt_tensor *xt = &a->in[MT_RESIZE_IN_X], *yt = &a->out[MT_RESIZE_OUT_Y];
  const int32_t *at = a->attrs;
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, 4) || !mt_tensor_ok(yt, MT_DTYPE_INT8, 4) ||
      xt->rec->shape[0] != yt->rec->shape[0] || xt->rec->shape[3] != yt->rec->shape[3] ||
      !rs_axis_init(ay, xt->rec->shape[1], yt->rec->shape[1], at + MT_RESIZE_SCALE_Y_N) ||
      !rs_axis_init(ax, xt->rec->shape[2], yt->rec->shape[2], at + MT_RESIZE_SCALE_X_N)) {
    return 0;
  }
  s->x = (const int8_t *)xt->data;
  s->y = (int8_t *)yt->data;
  s->h = xt->rec->shape[1];
  s->w = xt->rec->shape[2];
  s->c = xt->rec->shape[3];
  s->oh = yt->rec->shape[1];
  s->ow = yt->rec->shape[2];
  s->mult = at[MT_RESIZE_MULT];
  s->shift = at[MT_RESIZE_SHIFT];
  s->lo = at[MT_RESIZE_ACT_MIN];
  s->hi = at[MT_RESIZE_ACT_MAX];
  if (!mt_act_ok(s->lo, s->hi) || s->c > MT_DIM_MAX) {
    return 0;
  }
  if (at[MT_RESIZE_MODE] == 0) {
    return s->mult == 0 && s->shift == 0;
  }
  const int32_t bound = 128 * ay->n * ax->n; /* |acc| <= 2^29 */
  return at[MT_RESIZE_MODE] == 1 && mt_rq_range_ok(-bound, bound, s->mult, s->shift);
}

// x: (N, H, W, C) int8  ->  y: (N, OH, OW, C) int8
mt_status mt_resize_s8(const mt_op_args *args)
{
  rs_ctx s;
  rs_axis ay, ax;
  if (!mt_args_ok(args, MT_RESIZE_N_INPUTS, MT_RESIZE_N_OUTPUTS, MT_RESIZE_N_ATTRS) ||
      !rs_init(&s, &ay, &ax, args)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int nearest = args->attrs[MT_RESIZE_MODE] == 0;
  const size_t in_image = (size_t)s.h * s.w * s.c, out_image = (size_t)s.oh * s.ow * s.c;
  for (uint32_t b = 0; b < args->in[MT_RESIZE_IN_X].rec->shape[0]; b++) {
    const int8_t *x = s.x + b * in_image;
    int8_t *y = s.y + b * out_image;
    if (nearest) {
      rs_nearest_image(&s, ay, &ax, x, y);
    } else {
      rs_bilinear_image(&s, ay, &ax, x, y);
    }
  }
  return MT_STATUS_OK;
}
