/*
 * mt_conv_transpose_axis.h - the geometry of one spatial axis of conv_transpose2d: which taps of
 * the kernel land on output position o, and the input positions they read (docs/numerics.md,
 * conv_transpose2d). Included by mt_conv_transpose2d_s8.c only.
 */
#ifndef MT_CONV_TRANSPOSE_AXIS_H
#define MT_CONV_TRANSPOSE_AXIS_H

#include "mt_kernel_util.h"

/* One spatial axis: output o takes taps k0, k0 + step, ... (n of them), reading input
 * positions i0, i0 - di, ... */
typedef struct {
  int32_t size, kernel, stride, dilation, pad0, out, step, di;
} ct_axis;

typedef struct {
  int32_t k0, n, i0;
} ct_run;

static int32_t ct_gcd(int32_t a, int32_t b)
{
  while (b != 0) {
    const int32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* 1 when the attributes are legal and `out` is the length they imply: (size - 1) * stride +
 * dilation * (kernel - 1) + 1 - pad0 - pad1, with pad0 >= 0 and pad1 > -max(stride, dilation)
 * (docs/numerics.md). */
static int ct_axis_init(ct_axis *ax, uint32_t size, int32_t kernel, int32_t stride,
                        int32_t dilation, int32_t pad0, int32_t pad1, uint32_t out)
{
  const int32_t most = stride > dilation ? stride : dilation;
  if (size < 1 || size > MT_DIM_MAX || kernel < 1 || kernel > MT_DIM_MAX || stride < 1 ||
      stride > MT_DIM_MAX || dilation < 1 || dilation > MT_DIM_MAX || pad0 < 0 ||
      pad0 > MT_DIM_MAX || pad1 <= -most || pad1 > MT_DIM_MAX) {
    return 0;
  }
  const int64_t len =
      ((int64_t)size - 1) * stride + (int64_t)dilation * (kernel - 1) + 1 - pad0 - pad1;
  if (len < 1 || len > MT_DIM_MAX || (uint64_t)len != out) {
    return 0;
  }
  const int32_t g = ct_gcd(stride, dilation);
  const ct_axis a = {(int32_t)size, kernel,       stride,     dilation,
                     pad0,          (int32_t)len, stride / g, dilation / g};
  *ax = a;
  return 1;
}

/* The taps of output position o that land inside the input (r->n == 0: none), in unsigned
 * 32-bit arithmetic (t = o + pad0 < 2^31; no 64-bit division, a library call on Cortex-M). */
static void ct_taps(const ct_axis *ax, int32_t o, ct_run *r)
{
  const uint32_t t = (uint32_t)o + (uint32_t)ax->pad0, s = (uint32_t)ax->stride;
  const uint32_t d = (uint32_t)ax->dilation, last = (uint32_t)ax->kernel - 1u;
  uint32_t k = 0, kd = 0; /* kd = k * d <= t: input i * stride == t - kd */
  r->n = 0;
  while ((t - kd) % s != 0) {
    if (++k >= (uint32_t)ax->step || k > last || d > t - kd) {
      return; /* no tap lands, or every landing one reads before the input */
    }
    kd += d;
  }
  uint32_t i = (t - kd) / s; /* decreases by di per landing tap */
  if (i >= (uint32_t)ax->size) { /* skip the taps reading past the end */
    const uint32_t skip = (i - (uint32_t)ax->size) / (uint32_t)ax->di + 1u;
    if (skip > (last - k) / (uint32_t)ax->step) {
      return;
    }
    k += skip * (uint32_t)ax->step;
    i -= skip * (uint32_t)ax->di; /* >= size - di: no wrap when it is negative is checked */
    if (i >= (uint32_t)ax->size) {
      return;
    }
  }
  const uint32_t by_k = (last - k) / (uint32_t)ax->step + 1u, by_i = i / (uint32_t)ax->di + 1u;
  r->k0 = (int32_t)k;
  r->i0 = (int32_t)i;
  r->n = (int32_t)(by_k < by_i ? by_k : by_i);
}

/* Every tap of the phase of output position o (inside the input or not): k0, n, and the input
 * position i0 of tap k0 (may lie outside the input). */
static void ct_phase_taps(const ct_axis *ax, int32_t o, ct_run *r, int64_t *i0)
{
  const uint32_t t = (uint32_t)o + (uint32_t)ax->pad0, s = (uint32_t)ax->stride;
  const uint32_t dm = (uint32_t)ax->dilation % s; /* (t - k * d) mod s, 32-bit: */
  uint32_t k = 0, res = t % s;
  while (k < (uint32_t)ax->step && k < (uint32_t)ax->kernel && res != 0) {
    res = res >= dm ? res - dm : res + s - dm;
    k++;
  }
  r->k0 = (int32_t)k;
  r->n = k < (uint32_t)ax->step && k < (uint32_t)ax->kernel
             ? (ax->kernel - 1 - r->k0) / ax->step + 1
             : 0;
  const uint64_t kd = (uint64_t)k * (uint32_t)ax->dilation; /* i0 exact when r->n > 0 */
  *i0 = kd <= t ? (int64_t)((t - (uint32_t)kd) / s) : -(int64_t)((kd - t) / s);
}

#endif /* MT_CONV_TRANSPOSE_AXIS_H */
