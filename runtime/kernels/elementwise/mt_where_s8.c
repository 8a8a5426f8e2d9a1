/*
 * mt_where_s8.c - y = mask ? rescale(a) : rescale(b), each a rescale into y's qparams:
 *   rescale(v) = clamp(rq(v - zp, mult, shift) + out_zp, -128, 127)
 * Any nonzero mask byte selects a (compare writes 0/1). Numpy broadcasting of all three operands
 * (ranks <= 6): an odometer over y's outer dims, each operand stepping by its own strides (0
 * where it is broadcast), and an inner run over y's last dim. When both rescales are the
 * identity (mult 2^30, shift 30, zp == out_zp: a scalar made in y's qparams, masked_fill's shared
 * qparams) the run is a pure select: MVE 16 lanes per VPSEL. y may alias an operand of its size.
 * int16 a, b and y (a16w8, docs/numerics.md section 6): zero points 0, the clamp [-32767, 32767],
 * the same broadcasting, plain C (an attention mask: a select over the scores).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

typedef struct {
  const uint8_t *m;
  const int8_t *a, *b; /* int16 a, b: the bytes of their elements */
  uint32_t sm, sa, sb; /* element step along the run: 1, or 0 when broadcast */
} mt_where_run_t;

#define MT_S16_MAX 32767

/* int16 a, b and y (docs/numerics.md section 6): zero points 0, each side rescaled and clamped
 * to [-32767, 32767], or a pure select when both rescales are the identity. */
static void mt_where_run16(const mt_where_run_t *r, int16_t *y, uint32_t n, const int32_t *at,
                           int ident)
{
  const int16_t *a = (const int16_t *)(const void *)r->a, *b = (const int16_t *)(const void *)r->b;
  for (uint32_t i = 0; i < n; i++) {
    const int sel = r->m[i * r->sm] != 0;
    const int32_t v = sel ? a[i * r->sa] : b[i * r->sb];
    const int64_t q = ident ? v
                      : sel ? mt_rq(v, at[MT_WHERE_A_MULT], at[MT_WHERE_A_SHIFT])
                            : mt_rq(v, at[MT_WHERE_B_MULT], at[MT_WHERE_B_SHIFT]);
    y[i] = (int16_t)(q < -MT_S16_MAX ? -MT_S16_MAX : (q > MT_S16_MAX ? MT_S16_MAX : q));
  }
}

static inline int mt_where_ident(int32_t zp, int32_t mult, int32_t shift, int32_t out_zp)
{
  return mult == (1 << 30) && shift == 30 && zp == out_zp;
}

static void mt_where_run(const mt_where_run_t *r, int8_t *y, uint32_t n, const int32_t *at,
                         int ident)
{
  uint32_t i = 0;
  if (ident) {
#if MT_MVE
    if (r->sm == 1) {
      const int8x16_t ca = vdupq_n_s8(r->a[0]), cb = vdupq_n_s8(r->b[0]);
      for (; i < n; i += 16) {
        const mve_pred16_t p = vctp8q(n - i);
        const mve_pred16_t sel = vcmpneq_n_u8(vldrbq_z_u8(r->m + i, p), 0);
        const int8x16_t va = r->sa ? vldrbq_z_s8(r->a + i, p) : ca;
        const int8x16_t vb = r->sb ? vldrbq_z_s8(r->b + i, p) : cb;
        vstrbq_p_s8(y + i, vpselq_s8(va, vb, sel), p);
      }
    }
#endif /* MT_MVE */
    for (; i < n; i++) {
      y[i] = r->m[i * r->sm] ? r->a[i * r->sa] : r->b[i * r->sb];
    }
    return;
  }
  const int32_t out_zp = at[MT_WHERE_OUT_ZP];
  for (; i < n; i++) {
    y[i] = r->m[i * r->sm] ? mt_requantize(r->a[i * r->sa] - at[MT_WHERE_A_ZP], at[MT_WHERE_A_MULT],
                                           at[MT_WHERE_A_SHIFT], out_zp, MT_S8_MIN, MT_S8_MAX)
                           : mt_requantize(r->b[i * r->sb] - at[MT_WHERE_B_ZP], at[MT_WHERE_B_MULT],
                                           at[MT_WHERE_B_SHIFT], out_zp, MT_S8_MIN, MT_S8_MAX);
  }
}

/* Strides of t's elements along each dim of y (right-aligned; 0 where t's dim is 1 or absent);
 * 0 when t does not broadcast to y. */
static int mt_where_strides(const mt_tensor *t, const mt_tensor *y, uint32_t st[MT_MAX_RANK])
{
  uint32_t s = 1;
  if (t->rec->rank > y->rec->rank) {
    return 0;
  }
  for (uint8_t k = y->rec->rank; k-- > 0;) {
    const uint32_t d =
        k + t->rec->rank < y->rec->rank ? 1u : t->rec->shape[k + t->rec->rank - y->rec->rank];
    if (d != y->rec->shape[k] && d != 1) {
      return 0;
    }
    st[k] = d == 1 ? 0 : s;
    s *= d;
  }
  return 1;
}

/* The operands fit: int8 a, b, y (int16: wide, zero points 0), a uint8 mask, ranks that
 * broadcast, each rescale's rq of the whole input range inside int32. */
static int mt_where_ok(const mt_op_args *args, int wide)
{
  const int32_t *at = args->attrs;
  const mt_tensor *m = &args->in[MT_WHERE_IN_MASK], *a = &args->in[MT_WHERE_IN_A];
  const mt_tensor *b = &args->in[MT_WHERE_IN_B], *y = &args->out[MT_WHERE_OUT_Y];
  const uint8_t r = m->rec->rank > a->rec->rank ? m->rec->rank : a->rec->rank,
                dt = wide ? MT_DTYPE_INT16 : MT_DTYPE_INT8;
  const int32_t lo = wide ? -MT_S16_MAX - 1 : MT_S8_MIN, hi = wide ? MT_S16_MAX : MT_S8_MAX;
  return mt_tensor_ok(m, MT_DTYPE_UINT8, m->rec->rank) && mt_tensor_ok(a, dt, a->rec->rank) &&
         mt_tensor_ok(b, dt, b->rec->rank) && mt_tensor_ok(y, dt, y->rec->rank) &&
         y->rec->rank <= MT_MAX_RANK && y->rec->rank == (r > b->rec->rank ? r : b->rec->rank) &&
         mt_zp_ok(at[MT_WHERE_A_ZP]) && mt_zp_ok(at[MT_WHERE_B_ZP]) &&
         mt_zp_ok(at[MT_WHERE_OUT_ZP]) &&
         (!wide ||
          (at[MT_WHERE_A_ZP] == 0 && at[MT_WHERE_B_ZP] == 0 && at[MT_WHERE_OUT_ZP] == 0)) &&
         mt_rq_range_ok(lo - at[MT_WHERE_A_ZP], hi - at[MT_WHERE_A_ZP], at[MT_WHERE_A_MULT],
                        at[MT_WHERE_A_SHIFT]) &&
         mt_rq_range_ok(lo - at[MT_WHERE_B_ZP], hi - at[MT_WHERE_B_ZP], at[MT_WHERE_B_MULT],
                        at[MT_WHERE_B_SHIFT]);
}

/* One run of y: the int8 or the int16 form. */
static void mt_where_any(const mt_where_run_t *r, int8_t *y, uint32_t n, const int32_t *at,
                         int ident, int wide)
{
  if (wide) {
    mt_where_run16(r, (int16_t *)(void *)y, n, at, ident);
  } else {
    mt_where_run(r, y, n, at, ident);
  }
}

// mask: uint8, a, b: int8, all numpy-broadcastable to y (rank <= 6)  ->  y: int8
mt_status mt_where_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_WHERE_N_INPUTS, MT_WHERE_N_OUTPUTS, MT_WHERE_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int wide = args->in[MT_WHERE_IN_A].rec->dtype == MT_DTYPE_INT16; /* int16 a, b, y */
  if (!mt_where_ok(args, wide)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *mt = &args->in[MT_WHERE_IN_MASK], *at = &args->in[MT_WHERE_IN_A];
  const mt_tensor *bt = &args->in[MT_WHERE_IN_B], *yt = &args->out[MT_WHERE_OUT_Y];
  const int32_t *attrs = args->attrs;
  uint32_t sm[MT_MAX_RANK], sa[MT_MAX_RANK], sb[MT_MAX_RANK], idx[MT_MAX_RANK] = {0};
  if (!mt_where_strides(mt, yt, sm) || !mt_where_strides(at, yt, sa) ||
      !mt_where_strides(bt, yt, sb)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int ident = mt_where_ident(attrs[MT_WHERE_A_ZP], attrs[MT_WHERE_A_MULT],
                                   attrs[MT_WHERE_A_SHIFT], attrs[MT_WHERE_OUT_ZP]) &&
                    mt_where_ident(attrs[MT_WHERE_B_ZP], attrs[MT_WHERE_B_MULT],
                                   attrs[MT_WHERE_B_SHIFT], attrs[MT_WHERE_OUT_ZP]);
  const uint8_t r = yt->rec->rank;
  const uint32_t total = mt_numel(yt), nm = mt_numel(mt), na = mt_numel(at), nb = mt_numel(bt);
  uint32_t run = r > 0 ? yt->rec->shape[r - 1] : 1, om = 0, oa = 0, ob = 0;
  int8_t *y = (int8_t *)yt->data;
  if (total == 0) {
    return MT_STATUS_OK;
  }
  /* every operand y's shape or one value (a scalar): one run over all of y */
  if ((nm == total || nm == 1) && (na == total || na == 1) && (nb == total || nb == 1)) {
    const mt_where_run_t w = {(const uint8_t *)mt->data,
                              (const int8_t *)at->data,
                              (const int8_t *)bt->data,
                              nm != 1,
                              na != 1,
                              nb != 1};
    mt_where_any(&w, y, total, attrs, ident, wide);
    return MT_STATUS_OK;
  }
  for (uint32_t o = 0; o < total; o += run) {
    const uint32_t es = wide ? 2u : 1u; /* bytes per element of a, b and y */
    const mt_where_run_t w = {(const uint8_t *)mt->data + om,
                              (const int8_t *)at->data + (size_t)oa * es,
                              (const int8_t *)bt->data + (size_t)ob * es,
                              r > 0 ? sm[r - 1] != 0 : 0,
                              r > 0 ? sa[r - 1] != 0 : 0,
                              r > 0 ? sb[r - 1] != 0 : 0};
    mt_where_any(&w, y + (size_t)o * es, run, attrs, ident, wide);
    for (uint8_t k = (uint8_t)(r > 0 ? r - 1 : 0); k-- > 0;) { /* odometer over outer dims */
      om += sm[k];
      oa += sa[k];
      ob += sb[k];
      if (++idx[k] < yt->rec->shape[k]) {
        break;
      }
      idx[k] = 0;
      om -= sm[k] * yt->rec->shape[k];
      oa -= sa[k] * yt->rec->shape[k];
      ob -= sb[k] * yt->rec->shape[k];
    }
  }
  return MT_STATUS_OK;
}
