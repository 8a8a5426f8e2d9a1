/*
 * mt_binary_s16.c - add, sub and mul of two int16 tensors (a16w8, docs/numerics.md section 6):
 * zero points 0, an int16 y in [act_min, act_max] within [-32767, 32767], numpy broadcasting
 * (mt_bcast.h's shape rule and runs, walked here over 2-byte elements; y may be a or b).
 *
 *   add, sub  y = clamp(rq(rq(a, a_mult, a_shift) +/- rq(b, b_mult, b_shift), out_mult, out_shift))
 *   mul       y = clamp(rq(a * b, mult, shift))                     |a * b| <= 2^30
 *
 * The attributes alone decide, as the reference does, that every int32 intermediate fits for
 * every int16 input in [-32767, 32767]; otherwise the op is refused before y is touched. MVE:
 * same-shape runs four lanes at a time (mt_rq_v on int32 lanes, exact in the domain); every
 * other run, and every other core, one element at a time with the 64-bit rq.
 */
#include "mt_bcast.h"
#include "mt_binary16.h"
#include "mt_kernels.h"

#define BIN16_MAX 32767

enum { BIN16_ADD = 0, BIN16_SUB = 1, BIN16_MUL = 2 };

/* (mult, shift) pairs of a, b and out (add, sub: the MT_ADD_* order; mul: only out = the one) */
typedef struct {
  int32_t am, as, bm, bs, om, os, lo, hi, kind;
} bin16;

static int bin16_in32(int64_t v)
{
  return v >= -0x7FFFFFFF - 1 && v <= 0x7FFFFFFF;
}

/* The static domain: 1 when every intermediate fits int32 for every int16 input pair. */
static int bin16_init(bin16 *b, const int32_t *at, int kind)
{
  b->kind = kind;
  if (kind == BIN16_MUL) {
    b->om = at[MT_MUL_MULT], b->os = at[MT_MUL_SHIFT];
    b->lo = at[MT_MUL_ACT_MIN], b->hi = at[MT_MUL_ACT_MAX];
    const int32_t p = BIN16_MAX * BIN16_MAX;
    return at[MT_MUL_A_ZP] == 0 && at[MT_MUL_B_ZP] == 0 && at[MT_MUL_OUT_ZP] == 0 &&
           mt_rq_range_ok(-p, p, b->om, b->os) && -BIN16_MAX <= b->lo && b->lo <= b->hi &&
           b->hi <= BIN16_MAX;
  }
  b->am = at[MT_ADD_A_MULT], b->as = at[MT_ADD_A_SHIFT];
  b->bm = at[MT_ADD_B_MULT], b->bs = at[MT_ADD_B_SHIFT];
  b->om = at[MT_ADD_OUT_MULT], b->os = at[MT_ADD_OUT_SHIFT];
  b->lo = at[MT_ADD_ACT_MIN], b->hi = at[MT_ADD_ACT_MAX];
  if (at[MT_ADD_A_ZP] != 0 || at[MT_ADD_B_ZP] != 0 || at[MT_ADD_OUT_ZP] != 0 ||
      !mt_scale_ok(b->am, b->as) || !mt_scale_ok(b->bm, b->bs) || !mt_scale_ok(b->om, b->os) ||
      b->lo < -BIN16_MAX || b->lo > b->hi || b->hi > BIN16_MAX) {
    return 0;
  }
  const int64_t a1 = mt_rq(BIN16_MAX, b->am, b->as), a0 = mt_rq(-BIN16_MAX, b->am, b->as);
  const int64_t b1 = mt_rq(BIN16_MAX, b->bm, b->bs), b0 = mt_rq(-BIN16_MAX, b->bm, b->bs);
  const int64_t lo = kind == BIN16_SUB ? a0 - b1 : a0 + b0,
                hi = kind == BIN16_SUB ? a1 - b0 : a1 + b1;
  return bin16_in32(lo) && bin16_in32(hi) && bin16_in32(mt_rq((int32_t)lo, b->om, b->os)) &&
         bin16_in32(mt_rq((int32_t)hi, b->om, b->os));
}

static int16_t bin16_one(const bin16 *b, int32_t u, int32_t v)
{
  int64_t acc;
  if (b->kind == BIN16_MUL) {
    acc = (int64_t)u * v;
  } else {
    const int64_t ra = mt_rq(u, b->am, b->as), rb = mt_rq(v, b->bm, b->bs);
    acc = b->kind == BIN16_SUB ? ra - rb : ra + rb;
  }
  const int64_t r = mt_rq((int32_t)acc, b->om, b->os);
  return (int16_t)(r < b->lo ? b->lo : (r > b->hi ? b->hi : r));
}

/* y[0..n) for one run; sa, sb: 1 where the operand walks the run, 0 where it is a constant. */
static void bin16_run(const bin16 *b, const int16_t *a, const int16_t *bb, int16_t *y, uint32_t n,
                      uint32_t sa, uint32_t sb)
{
  uint32_t i = 0;
#if MT_MVE
  const int32x4_t om = vdupq_n_s32(b->om), oh = vdupq_n_s32(32 - b->os);
  const int32x4_t ol = vdupq_n_s32(-b->os), am = vdupq_n_s32(b->am), ah = vdupq_n_s32(32 - b->as);
  const int32x4_t al = vdupq_n_s32(-b->as), bm = vdupq_n_s32(b->bm), bh = vdupq_n_s32(32 - b->bs);
  const int32x4_t bl = vdupq_n_s32(-b->bs), lo = vdupq_n_s32(b->lo), hi = vdupq_n_s32(b->hi);
  for (; sa && sb && i < n; i += 4) { /* four lanes read before four are written */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t u = vldrhq_z_s32(a + i, p), v = vldrhq_z_s32(bb + i, p);
    int32x4_t acc;
    if (b->kind == BIN16_MUL) {
      acc = vmulq_s32(u, v);
    } else {
      const int32x4_t ra = mt_rq_v(u, am, ah, al), rb = mt_rq_v(v, bm, bh, bl);
      acc = b->kind == BIN16_SUB ? vsubq_s32(ra, rb) : vaddq_s32(ra, rb);
    }
    vstrhq_p_s32(y + i, vminq_s32(vmaxq_s32(mt_rq_v(acc, om, oh, ol), lo), hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) {
    y[i] = bin16_one(b, a[i * sa], bb[i * sb]);
  }
}

/* Every run of y in y's order: mt_bcast's odometer over element offsets. */
static mt_status bin16_op(const mt_op_args *args, int kind)
{
  const uint16_t n_attrs = kind == BIN16_MUL ? MT_MUL_N_ATTRS : MT_ADD_N_ATTRS;
  if (!mt_args_ok(args, 2, 1, n_attrs)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[0], *bt = &args->in[1], *yt = &args->out[0];
  mt_bcast bc;
  bin16 b = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (!mt_tensor_ok(at, MT_DTYPE_INT16, at->rec->rank) ||
      !mt_tensor_ok(bt, MT_DTYPE_INT16, bt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT16, yt->rec->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      !bin16_init(&b, args->attrs, kind)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *a = (const int16_t *)at->data, *bb = (const int16_t *)bt->data;
  int16_t *y = (int16_t *)yt->data;
  uint32_t idx[MT_MAX_RANK] = {0}, oa = 0, ob = 0;
  for (uint32_t r = 0; bc.run > 0 && r < bc.outer; r++) {
    bin16_run(&b, a + oa, bb + ob, y + (size_t)r * bc.run, bc.run, bc.mode != MT_BCAST_A_CONST,
              bc.mode != MT_BCAST_B_CONST);
    for (uint8_t k = 0; k < bc.rank; k++) { /* next: odometer, innermost first */
      oa += bc.a_step[k];
      ob += bc.b_step[k];
      if (++idx[k] < bc.dim[k]) {
        break;
      }
      idx[k] = 0;
      oa -= bc.a_step[k] * bc.dim[k]; /* unsigned: back to the start of this dim */
      ob -= bc.b_step[k] * bc.dim[k];
    }
  }
  return MT_STATUS_OK;
}

// a, b: int16, numpy-broadcastable to y (rank <= 6)  ->  y: int16 (y may alias a or b)
mt_status mt_add_s16(const mt_op_args *args)
{
  return bin16_op(args, BIN16_ADD);
}

mt_status mt_sub_s16(const mt_op_args *args)
{
  return bin16_op(args, BIN16_SUB);
}

mt_status mt_mul_s16(const mt_op_args *args)
{
  return bin16_op(args, BIN16_MUL);
}
