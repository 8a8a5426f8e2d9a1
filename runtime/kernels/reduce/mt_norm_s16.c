/*
 * mt_norm_s16.c - layer / group / instance normalisation of an int16 x (a16w8,
 * docs/numerics.md section 6); mt_norm_s8 calls it for an int16 x (a weak reference: linked only
 * when a program has an int16 norm). Per group of n <= 2^15 reduced elements:
 *   D  = n * sum(x^2) - sum(x)^2                  int64, exact (<= 2^60)
 *   t  = D + eps;  s = max(0, (bits(t) - 27) / 2)  t >> 2s < 2^28
 *   R  = isqrt(2^62 / (t >> 2s))                   >= 2^17: ~ 2^(31 + s) / sqrt(t)
 *   z  = ((n x - sum(x)) * R + 2^(10 + s)) >> (11 + s)      Q20, |z| <= sqrt(n - 1) 2^20 + 1
 * then per element i, affine channel c = (i / inner) % A:
 *   y = clamp(rq(z * gamma_sign[c] + beta[c], mult[c], shift[c]), act_min, act_max)   int16
 * (D = 0 gives n x - sum(x) = 0, so z = 0 whatever R.) Every channel's accumulator bound and rq
 * are checked before anything is written. Two passes per group; plain C on every ISA.
 */
#include "mt_reduce.h"

#define MT_NORM16_MAX_COUNT (1u << 15) /* |n x - sum x| < 2^31, n sum(x^2) <= 2^60 */
#define MT_NORM16_MAX_BETA  (1 << 30)
#define MT_S16_MAX          32767

mt_status mt_norm_s16(const mt_op_args *args) MT_WEAK16;

/* D and sum(x) of the group whose first element is x (mt_spread for int16: |sum| <= 2^30). */
static uint64_t mt_spread16(const int16_t *x, const mt_reduce_geom *g, uint64_t n, int32_t *sum)
{
  mt_odometer in = {{0}, 0};
  int32_t s1 = 0;
  uint64_t s2 = 0;
  do {
    const int32_t v = x[in.off];
    s1 += v;
    s2 += (uint64_t)(v * v); /* <= 2^30 */
  } while (mt_odometer_next(g, &in, 1));
  *sum = s1;
  return n * s2 - (uint64_t)((int64_t)s1 * s1);
}

/* Every channel legal: sign in {-1, 0, 1}, |beta| <= 2^30, (mult, shift) legal and rq of the
 * largest accumulator (zmax + |beta|) inside int32. */
static int mt_norm16_channels_ok(const int8_t *sign, const int32_t *beta, const int32_t *mult,
                                 const int32_t *shift, uint32_t a, int64_t zmax)
{
  for (uint32_t c = 0; c < a; c++) {
    if (sign[c] < -1 || sign[c] > 1 || beta[c] < -MT_NORM16_MAX_BETA ||
        beta[c] > MT_NORM16_MAX_BETA || !mt_scale_ok(mult[c], shift[c])) {
      return 0;
    }
    const int64_t top = zmax + (beta[c] < 0 ? -(int64_t)beta[c] : beta[c]); /* < 2^31 */
    if (top > INT32_MAX || !mt_rq_range_ok((int32_t)-top, (int32_t)top, mult[c], shift[c])) {
      return 0;
    }
  }
  return 1;
}

// x: (d0, ..., dr-1) int16, r in 1..6; gamma_sign: (A,) int8; beta, mult, shift: (A,) int32
//   ->  y: x's shape, int16
mt_status mt_norm_s16(const mt_op_args *args)
{
  const mt_tensor *xt = &args->in[MT_NORM_IN_X], *yt = &args->out[MT_NORM_OUT_Y];
  const mt_tensor *st = &args->in[MT_NORM_IN_GAMMA_SIGN];
  const int32_t *at = args->attrs;
  const int32_t eps = at[MT_NORM_EPS], inner = at[MT_NORM_INNER];
  const int32_t lo = at[MT_NORM_ACT_MIN], hi = at[MT_NORM_ACT_MAX];
  const uint32_t a = st->rec->shape[0];
  mt_reduce_geom g;
  mt_tensor_t kept_rec = *yt->rec; /* the geometry's y: x with the reduced dims 1 */
  const mt_tensor kept = {yt->data, &kept_rec};
  for (uint8_t i = 0; i < xt->rec->rank && i < 6; i++) {
    kept_rec.shape[i] = ((at[MT_NORM_AXES] >> i) & 1) ? 1u : xt->rec->shape[i];
  }
  if (xt->rec->dtype != MT_DTYPE_INT16 || yt->rec->dtype != MT_DTYPE_INT16 ||
      !mt_same_shape(xt, yt) ||
      !mt_reduce_geom_init_t(&g, xt, &kept, at[MT_NORM_AXES], MT_DTYPE_INT16) ||
      g.count > MT_NORM16_MAX_COUNT || !mt_tensor_ok(st, MT_DTYPE_INT8, 1) || a < 1 ||
      !mt_vec_ok(&args->in[MT_NORM_IN_BETA], a) || !mt_vec_ok(&args->in[MT_NORM_IN_MULT], a) ||
      !mt_vec_ok(&args->in[MT_NORM_IN_SHIFT], a) || eps < 1 || inner < 1 ||
      at[MT_NORM_OUT_ZP] != 0 || lo < -MT_S16_MAX || lo > hi || hi > MT_S16_MAX) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *sign = (const int8_t *)st->data;
  const int32_t *beta = (const int32_t *)args->in[MT_NORM_IN_BETA].data;
  const int32_t *mult = (const int32_t *)args->in[MT_NORM_IN_MULT].data;
  const int32_t *shift = (const int32_t *)args->in[MT_NORM_IN_SHIFT].data;
  const int64_t zmax = ((int64_t)(mt_isqrt64(g.count - 1u) + 1u) << 20) + 1; /* < 2^28 */
  if (!mt_norm16_channels_ok(sign, beta, mult, shift, a, zmax)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *x = (const int16_t *)xt->data;
  int16_t *y = (int16_t *)yt->data;
  const int64_t n = g.count;
  mt_odometer out = {{0}, 0}, in = {{0}, 0};
  int32_t s1;
  do {
    const uint64_t t = mt_spread16(x + out.off, &g, (uint64_t)n, &s1) + (uint64_t)eps;
    int32_t s = 0;
    while ((t >> (2 * s)) >= ((uint64_t)1 << 28)) { /* the least s with t >> 2s < 2^28 */
      s++;
    }
    const int64_t r = mt_isqrt64(((uint64_t)1 << 62) / (t >> (2 * s)));
    const int32_t sh = 11 + s;
    do { /* x[i] is read before y[i] is written */
      const uint32_t i = out.off + in.off, c = (i / (uint32_t)inner) % a;
      const int64_t dev = n * x[i] - s1; /* |dev| < 2^31, r <= 2^31 */
      const int32_t z = (int32_t)((dev * r + ((int64_t)1 << (sh - 1))) >> sh);
      const int64_t v = mt_rq(z * sign[c] + beta[c], mult[c], shift[c]); /* inside int32 */
      y[i] = (int16_t)(v < lo ? lo : (v > hi ? hi : v));
    } while (mt_odometer_next(&g, &in, 1));
  } while (mt_odometer_next(&g, &out, 0));
  return MT_STATUS_OK;
}
