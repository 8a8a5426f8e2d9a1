/*
 * mt_norm_s8.c - layer / group / instance normalisation with a per-channel affine
 * (docs/numerics.md, "norm"). Per group of n reduced elements (the `axes` of x):
 *   D = n * sum(x^2) - sum(x)^2                  int64, exact (< 2^60)
 *   R = isqrt(2^62 / (D + eps))                  the reciprocal square root, <= 2^31
 *   z = ((n x - sum(x)) * R + 2^18) >> 19        Q12, |z| <= sqrt(n - 1) 2^12 + 1
 * then per element i, affine channel c = (i / inner) % A:
 *   y = clamp(rq(z * gamma_sign[c] + beta[c], mult[c], shift[c]) + out_zp, act_min, act_max)
 * Every channel's accumulator bound and rq are checked before anything is written. Two passes
 * per group over the odometer of mt_reduce.h (sums, then outputs); plain C on every ISA.
 */
#include "mt_reduce.h"

#define MT_NORM_MAX_BETA (1 << 30)

mt_status mt_norm_s16(const mt_op_args *args) MT_WEAK16; /* int16 x: mt_norm_s16.c */

/* Every channel legal: sign in {-1, 0, 1}, |beta| <= 2^30, (mult, shift) legal and rq of the
 * largest accumulator (zmax + |beta|) inside int32. */
static int mt_norm_channels_ok(const int8_t *sign, const int32_t *beta, const int32_t *mult,
                               const int32_t *shift, uint32_t a, int32_t zmax)
{
  for (uint32_t c = 0; c < a; c++) {
    if (sign[c] < -1 || sign[c] > 1 || beta[c] < -MT_NORM_MAX_BETA || beta[c] > MT_NORM_MAX_BETA) {
      return 0;
    }
    const int32_t top = zmax + (beta[c] < 0 ? -beta[c] : beta[c]); /* < 2^31 */
    if (!mt_rq_range_ok(-top, top, mult[c], shift[c])) {
      return 0;
    }
  }
  return 1;
}

// x: (d0, ..., dr-1) int8, r in 1..6; gamma_sign: (A,) int8; beta, mult, shift: (A,) int32
//   ->  y: x's shape, int8
mt_status mt_norm_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_NORM_N_INPUTS, MT_NORM_N_OUTPUTS, MT_NORM_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (args->in[MT_NORM_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_norm_s16 != NULL ? mt_norm_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_NORM_IN_X], *yt = &args->out[MT_NORM_OUT_Y];
  const mt_tensor *st = &args->in[MT_NORM_IN_GAMMA_SIGN];
  const int32_t *at = args->attrs;
  const int32_t eps = at[MT_NORM_EPS], inner = at[MT_NORM_INNER], zp = at[MT_NORM_OUT_ZP];
  const int32_t lo = at[MT_NORM_ACT_MIN], hi = at[MT_NORM_ACT_MAX];
  const uint32_t a = st->rec->shape[0];
  mt_reduce_geom g;
  mt_tensor_t kept_rec = *yt->rec; /* the geometry's y: x with the reduced dims 1 */
  const mt_tensor kept = {yt->data, &kept_rec};
  for (uint8_t i = 0; i < xt->rec->rank && i < 6; i++) {
    kept_rec.shape[i] = ((at[MT_NORM_AXES] >> i) & 1) ? 1u : xt->rec->shape[i];
  }
  if (!mt_same_shape(xt, yt) || !mt_reduce_geom_init(&g, xt, &kept, at[MT_NORM_AXES]) ||
      g.count > MT_REDUCE_MAX_COUNT || !mt_tensor_ok(st, MT_DTYPE_INT8, 1) || a < 1 ||
      !mt_vec_ok(&args->in[MT_NORM_IN_BETA], a) || !mt_vec_ok(&args->in[MT_NORM_IN_MULT], a) ||
      !mt_vec_ok(&args->in[MT_NORM_IN_SHIFT], a) || eps < 1 || inner < 1 || !mt_zp_ok(zp) ||
      !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *sign = (const int8_t *)st->data;
  const int32_t *beta = (const int32_t *)args->in[MT_NORM_IN_BETA].data;
  const int32_t *mult = (const int32_t *)args->in[MT_NORM_IN_MULT].data;
  const int32_t *shift = (const int32_t *)args->in[MT_NORM_IN_SHIFT].data;
  const int32_t zmax = (int32_t)(((mt_isqrt64(g.count - 1u) + 1u) << 12) + 1u); /* < 2^24 */
  if (!mt_norm_channels_ok(sign, beta, mult, shift, a, zmax)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const int64_t n = g.count;
  mt_odometer out = {{0}, 0}, in = {{0}, 0};
  int32_t s1;
  do {
    const uint64_t d = mt_spread(x + out.off, &g, (uint64_t)n, &s1);
    const int64_t r = mt_isqrt64(((uint64_t)1 << 62) / (d + (uint64_t)eps));
    do { /* x[i] is read before y[i] is written */
      const uint32_t i = out.off + in.off, c = (i / (uint32_t)inner) % a;
      const int64_t dev = n * x[i] - s1; /* |dev| < 2^31, r <= 2^31 */
      const int32_t z = (int32_t)((dev * r + (1 << 18)) >> 19);
      y[i] = mt_requantize(z * sign[c] + beta[c], mult[c], shift[c], zp, lo, hi);
    } while (mt_odometer_next(&g, &in, 1));
  } while (mt_odometer_next(&g, &out, 0));
  return MT_STATUS_OK;
}
