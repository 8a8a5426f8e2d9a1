/* mt_validate.c - mt_load, second half: the semantic checks of src/mcutorch/program/validate.py
 * (target flags, switches and ISA level -> regions -> tensors -> delegates -> ops -> io), then
 * the op flags of reader.py. The raw checks of mt_load.c have passed: every record is in
 * bounds, enum ids and switch bits are known, op operand and attribute ranges lie inside
 * OPERANDS and ATTRS, tensor sizes equal prod(shape) x element size. METADATA checks
 * ("sources" indices, JSON) are Python-only. */
#include <string.h>

#include "mt_internal.h"

static int mt_name_ok(const char *name) /* [A-Za-z0-9_]{1,8}, zero padded */
{
  uint32_t k;
  for (k = 0; k < 8 && name[k] != 0; k++) {
    char c = name[k];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return 0;
    }
  }
  return k > 0;
}

static mt_status mt_check_regions(const mt_model *m)
{
  uint32_t i, j; /* at most MT_MAX_REGIONS regions (mt_load.c): the name check is cheap */
  for (i = 0; i < m->n_regions; i++) {
    const mt_region_t *r = &m->regions[i];
    uint32_t a = r->alignment;
    MT_REQUIRE(mt_name_ok(r->name), MT_ERR_BAD_REGION);
    for (j = 0; j < i; j++) {
      MT_REQUIRE(memcmp(r->name, m->regions[j].name, sizeof r->name) != 0, MT_ERR_BAD_REGION);
    }
    MT_REQUIRE(a >= MT_REGION_ALIGN_MIN && a <= MT_REGION_ALIGN_MAX && (a & (a - 1)) == 0,
               MT_ERR_BAD_REGION);
    MT_REQUIRE(r->capacity == 0 || r->size <= r->capacity, MT_ERR_BAD_REGION);
  }
  return MT_STATUS_OK;
}

/* The f32 bits of a scale: finite and >= 0 is bits < 0x7F800000 or -0.0 (0x80000000), as in
 * Python; zero (+-0.0) is (bits & 0x7FFFFFFF) == 0. No float code needed. */
static uint32_t mt_scale_bits(const float *scale)
{
  uint32_t bits;
  memcpy(&bits, scale, sizeof bits);
  return bits;
}

static int mt_zero_point_ok(uint32_t dtype, int32_t zp)
{
  static const int32_t lo[MT_DTYPE_COUNT] = {-128, 0, -32768, INT32_MIN, INT32_MIN};
  static const int32_t hi[MT_DTYPE_COUNT] = {127, 255, 32767, INT32_MAX, INT32_MAX};
  return zp >= lo[dtype] && zp <= hi[dtype];
}

uint64_t mt_extent(const mt_tensor_t *t)
{
  const uint64_t n = mt_ring_slots(t);
  if (!(t->flags & MT_TENSOR_FLAG_RING) || n < 2) {
    return t->size;
  }
  return MT_RING_HEAD + (2 * n - 1) * (t->size / n);
}

static mt_status mt_check_tensor(const mt_model *m, const mt_tensor_t *t)
{
  uint32_t k;
  int64_t v;
  const uint32_t scale = mt_scale_bits(&t->scale);
  MT_REQUIRE(scale < 0x7F800000u || scale == 0x80000000u, MT_ERR_BAD_TENSOR);
  MT_REQUIRE(mt_zero_point_ok(t->dtype, t->zero_point), MT_ERR_BAD_TENSOR);
  MT_REQUIRE(t->dtype != MT_DTYPE_INT64 || t->storage == MT_STORAGE_CONST, MT_ERR_BAD_TENSOR);
  MT_REQUIRE(t->dtype != MT_DTYPE_INT32 || t->storage == MT_STORAGE_CONST ||
                 ((scale & 0x7FFFFFFFu) == 0 && t->zero_point == 0),
             MT_ERR_BAD_TENSOR); /* token ids (1.6) */
  if (t->storage == MT_STORAGE_ARENA) {
    MT_REQUIRE(t->region < m->n_regions, MT_ERR_BAD_TENSOR);
    MT_REQUIRE(t->offset % mt_dtype_bytes(t->dtype) == 0, MT_ERR_BAD_OFFSET);
    MT_REQUIRE((uint64_t)t->offset + t->size <= m->regions[t->region].size, MT_ERR_BAD_OFFSET);
  } else if (t->storage == MT_STORAGE_PERSISTENT) {
    MT_REQUIRE(t->offset % MT_ALIGN == 0 && (uint64_t)t->offset + mt_extent(t) <= UINT32_MAX,
               MT_ERR_BAD_OFFSET);
  } else {
    MT_REQUIRE(t->offset % MT_ALIGN == 0, MT_ERR_BAD_OFFSET);
    MT_REQUIRE((uint64_t)t->offset + t->size <= m->const_size, MT_ERR_BAD_OFFSET);
  }
  MT_REQUIRE(!(t->flags & MT_TENSOR_FLAG_RING) ||
                 (t->storage == MT_STORAGE_PERSISTENT && mt_ring_slots(t) >= 2),
             MT_ERR_BAD_TENSOR);
  for (k = 0; t->dtype == MT_DTYPE_INT64 && k < t->size / 8; k++) { /* an int48 bias (1.5) */
    memcpy(&v, m->constants + t->offset + 8 * k, sizeof v);
    MT_REQUIRE(v >= MT_INT48_MIN && v <= MT_INT48_MAX, MT_ERR_BAD_TENSOR);
  }
  return MT_STATUS_OK;
}

/* A scratch area: a region index (else `err`) and bytes inside its arena (else bad_offset). */
static mt_status mt_check_area(const mt_model *m, uint32_t region, uint32_t offset, uint32_t size,
                               int err)
{
  MT_REQUIRE(region < m->n_regions, err);
  MT_REQUIRE((uint64_t)offset + size <= m->regions[region].size, MT_ERR_BAD_OFFSET);
  return MT_STATUS_OK;
}

static mt_status mt_check_npu_area(const mt_model *m, uint32_t region, uint32_t offset,
                                   uint32_t size)
{
  if (region == MT_NONE16) {
    return MT_STATUS_OK;
  }
  MT_TRY(mt_check_area(m, region, offset, size, MT_ERR_BAD_DELEGATE));
  MT_REQUIRE(m->regions[region].flags & MT_REGION_FLAG_NPU, MT_ERR_BAD_DELEGATE);
  return MT_STATUS_OK;
}

static mt_status mt_check_const_range(const mt_model *m, uint32_t offset, uint32_t size)
{
  MT_REQUIRE(offset % MT_ALIGN == 0, MT_ERR_BAD_OFFSET);
  MT_REQUIRE((uint64_t)offset + size <= m->const_size, MT_ERR_BAD_OFFSET);
  return MT_STATUS_OK;
}

/* Each bound tensor lives exactly at its binding's offset in the delegate's scratch area. */
static mt_status mt_check_bindings(const mt_model *m, const mt_delegate_t *d)
{
  uint32_t k, n = (uint32_t)d->n_inputs + d->n_outputs; /* 1..256 each (mt_load.c) */
  MT_REQUIRE(d->scratch_region != MT_NONE16, MT_ERR_BAD_DELEGATE);
  for (k = 0; k < n; k++) {
    const mt_binding_t *b = &m->bindings[d->first_binding + k];
    const mt_tensor_t *t;
    MT_REQUIRE(b->tensor >= 0 && (uint32_t)b->tensor < m->n_tensors, MT_ERR_BAD_DELEGATE);
    t = &m->tensors[b->tensor];
    MT_REQUIRE(b->elem_size == mt_dtype_bytes(t->dtype) &&
                   mt_shape_numel(b->shape, MT_MAX_RANK) == mt_shape_numel(t->shape, t->rank),
               MT_ERR_BAD_DELEGATE);
    MT_REQUIRE((uint64_t)b->offset + t->size <= d->scratch_size, MT_ERR_BAD_OFFSET);
    MT_REQUIRE(t->storage == MT_STORAGE_ARENA && t->region == d->scratch_region &&
                   (uint64_t)t->offset == (uint64_t)d->scratch_offset + b->offset,
               MT_ERR_BAD_DELEGATE);
  }
  return MT_STATUS_OK;
}

/* The CPU version: ops [first, first + n) exist, and no other delegate claims any of them. */
static mt_status mt_check_cpu_ops(const mt_model *m, uint32_t k)
{
  const mt_delegate_t *d = &m->delegates[k];
  uint64_t first = d->cpu_first_op, end = first + d->cpu_n_ops;
  uint32_t j;
  if (d->cpu_first_op == MT_NONE32) {
    return MT_STATUS_OK;
  }
  MT_REQUIRE(d->cpu_n_ops >= 1, MT_ERR_BAD_DELEGATE);
  MT_REQUIRE(end <= m->n_ops, MT_ERR_BAD_OFFSET);
  for (j = 0; j < k; j++) {
    const mt_delegate_t *o = &m->delegates[j];
    if (o->cpu_first_op != MT_NONE32) {
      MT_REQUIRE(o->cpu_first_op >= end || first >= (uint64_t)o->cpu_first_op + o->cpu_n_ops,
                 MT_ERR_BAD_DELEGATE);
    }
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_delegate(const mt_model *m, uint32_t k)
{
  const mt_delegate_t *d = &m->delegates[k];
  MT_REQUIRE(d->npu != MT_NPU_NONE && d->npu == m->target->npu, MT_ERR_BAD_DELEGATE);
  MT_TRY(mt_check_const_range(m, d->command_offset, d->command_size));
  MT_REQUIRE(d->command_size > 0, MT_ERR_BAD_DELEGATE);
  MT_TRY(mt_check_const_range(m, d->weights_offset, d->weights_size));
  MT_TRY(mt_check_npu_area(m, d->scratch_region, d->scratch_offset, d->scratch_size));
  MT_TRY(
      mt_check_npu_area(m, d->fast_scratch_region, d->fast_scratch_offset, d->fast_scratch_size));
  /* the NPU uses both at once: the fast scratch shares no byte with the scratch */
  MT_REQUIRE(d->scratch_region == MT_NONE16 || d->fast_scratch_region != d->scratch_region ||
                 d->scratch_size == 0 || d->fast_scratch_size == 0 ||
                 d->fast_scratch_offset >= (uint64_t)d->scratch_offset + d->scratch_size ||
                 d->scratch_offset >= (uint64_t)d->fast_scratch_offset + d->fast_scratch_size,
             MT_ERR_BAD_DELEGATE);
  MT_TRY(mt_check_bindings(m, d));
  return mt_check_cpu_ops(m, k);
}

int mt_in_subgraph(const mt_model *m, uint32_t i)
{
  uint32_t k;
  for (k = 0; k < m->n_delegates; k++) {
    const mt_delegate_t *d = &m->delegates[k];
    if (d->cpu_first_op != MT_NONE32 && i >= d->cpu_first_op &&
        i - d->cpu_first_op < d->cpu_n_ops) {
      return 1;
    }
  }
  return 0;
}

static mt_status mt_check_operands(const mt_model *m, const int32_t *idx, uint32_t n, int want)
{
  uint32_t k;
  MT_REQUIRE(want == MT_VARIADIC ? n >= 1 : n == (uint32_t)want, MT_ERR_BAD_OP); /* n <= 256 */
  for (k = 0; k < n; k++) {
    MT_REQUIRE(idx[k] >= 0 && (uint32_t)idx[k] < m->n_tensors, MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* A delegate op names a delegate, is not inside a CPU version, and its operands are the
 * delegate's bound tensors, in binding order. */
static mt_status mt_check_delegate_op(const mt_model *m, uint32_t i, const int32_t *operands)
{
  const mt_op_t *op = &m->ops[i];
  int32_t index = m->attrs[op->first_attr + MT_DELEGATE_INDEX];
  const mt_delegate_t *d;
  uint32_t k;
  MT_REQUIRE(index >= 0 && (uint32_t)index < m->n_delegates, MT_ERR_BAD_DELEGATE);
  MT_REQUIRE(!mt_in_subgraph(m, i), MT_ERR_BAD_DELEGATE);
  d = &m->delegates[index];
  MT_REQUIRE(op->n_inputs == d->n_inputs && op->n_outputs == d->n_outputs, MT_ERR_BAD_DELEGATE);
  for (k = 0; k < (uint32_t)op->n_inputs + op->n_outputs; k++) {
    MT_REQUIRE(operands[k] == m->bindings[d->first_binding + k].tensor, MT_ERR_BAD_DELEGATE);
  }
  return MT_STATUS_OK;
}

/* Tensor a shares a byte with bytes [offset, +size) of `region`'s arena (storage ARENA) or of
 * the persistent buffer (storage PERSISTENT, region NONE16); empty ones never do. */
static int mt_meet(const mt_tensor_t *a, uint32_t storage, uint32_t region, uint32_t offset,
                   uint64_t size)
{
  return a->storage != MT_STORAGE_CONST && a->storage == storage && a->region == region &&
         a->size != 0 && size != 0 && (uint64_t)a->offset < (uint64_t)offset + size &&
         (uint64_t)offset < (uint64_t)a->offset + mt_extent(a);
}

#define MT_OVERLAP_PIXELS   4 /* ops/conv.py: pixels a 1x1 path reads before writing them */
#define MT_OVERLAP_COUT_MAX 64 /* ops/conv.py: one chunk of accumulators (MT_MAC_CHUNK) */

/* ops/conv.py _lead: max over o in [lo, hi] of o * a - min(size, max(0, o * s - p)) * b, at the
 * ends and breakpoints (every product stays within the operands' byte counts, < 2^33). */
static int64_t mt_lead(int64_t lo, int64_t hi, int64_t a, int64_t b, int64_t s, int64_t p,
                       int64_t size)
{
  /* p / s and (p + size - 1) / s in 32-bit divisions (1 <= s, 0 <= p < 2^31, 1 <= size <= 2^32:
   * the callers' attributes and a non-empty dimension), so no 64-bit division routine is linked */
  const uint32_t su = (uint32_t)s, pu = (uint32_t)p, qu = (uint32_t)(size - 1);
  const int64_t d0 = pu / su, d1 = (int64_t)(pu / su) + qu / su + (pu % su >= su - qu % su);
  const int64_t at[6] = {lo, hi, d0, d0 + 1, d1, d1 + 1};
  int64_t best = INT64_MIN;
  uint32_t k;
  for (k = 0; k < 6; k++) { /* clamped into [lo, hi] first: o * a stays below |y| */
    const int64_t o = at[k] < lo ? lo : at[k] > hi ? hi : at[k], r = o * s - p;
    const int64_t v = o * a - (r < 0 ? 0 : r > size ? size : r) * b;
    best = v > best ? v : best;
  }
  return best;
}

/* ops/conv.py OpDef.overlap (docs/numerics.md, Overlap): the least bytes an int8 depthwise or
 * 1x1 conv's y must start below its x (input 0), INT64_MAX when its loops allow no overlap.
 * Called only when x and y share a byte (both non-empty). conv2d and depthwise_conv2d store
 * CONV_ATTRS first, in one order. */
static int64_t mt_overlap_delta(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const mt_tensor_t *x = &m->tensors[in[0]], *w = &m->tensors[in[1]];
  const mt_tensor_t *y = &m->tensors[in[op->n_inputs]];
  const int32_t *a = m->attrs + op->first_attr;
  const int64_t n = x->shape[0], h = x->shape[1], wd = x->shape[2], c = x->shape[3];
  const int64_t ho = y->shape[1], wo = y->shape[2], co = y->shape[3], npx = n * h * wd;
  int64_t img, rows, cols, next;
  if (x->dtype != MT_DTYPE_INT8 || y->dtype != MT_DTYPE_INT8 || x->rank != 4 || y->rank != 4 ||
      a[MT_CONV2D_STRIDE_H] < 1 || a[MT_CONV2D_STRIDE_W] < 1 || a[MT_CONV2D_DILATION_H] < 1 ||
      a[MT_CONV2D_DILATION_W] < 1 || a[MT_CONV2D_PAD_TOP] < 0 || a[MT_CONV2D_PAD_LEFT] < 0 ||
      a[MT_CONV2D_PAD_BOTTOM] < 0 || a[MT_CONV2D_PAD_RIGHT] < 0) {
    return INT64_MAX;
  }
  if (op->opcode == MT_OP_CONV2D) { /* pixel q written before pixel q + MT_OVERLAP_PIXELS is read */
    if (w->rank != 4 || w->shape[1] != 1 || w->shape[2] != 1 || a[MT_CONV2D_GROUPS] != 1 ||
        a[MT_CONV2D_STRIDE_H] != 1 || a[MT_CONV2D_STRIDE_W] != 1 ||
        (a[MT_CONV2D_PAD_TOP] | a[MT_CONV2D_PAD_LEFT] | a[MT_CONV2D_PAD_BOTTOM] |
         a[MT_CONV2D_PAD_RIGHT]) != 0 ||
        n != y->shape[0] || h != ho || wd != wo || co > MT_OVERLAP_COUT_MAX) {
      return INT64_MAX;
    }
    /* the excess min(q + PIXELS, npx) * co - q * c is largest at q = 0, npx - PIXELS or npx - 1 */
    img = (npx < MT_OVERLAP_PIXELS ? npx : MT_OVERLAP_PIXELS) * co;
    rows = npx * co - (npx > MT_OVERLAP_PIXELS ? npx - MT_OVERLAP_PIXELS : 0) * c;
    next = npx * co - (npx - 1) * c;
    return img > rows ? (img > next ? img : next) : (rows > next ? rows : next);
  }
  if (op->opcode != MT_OP_DEPTHWISE_CONV2D || n != y->shape[0]) {
    return INT64_MAX;
  } /* raster order: y up to pixel p ends before the first x byte a pixel >= p reads */
  img = (n - 1) * ho * wo * co - (n - 1) * h * wd * c;
  img = img > 0 ? img : 0;
  rows = mt_lead(0, ho - 1, wo * co, wd * c, a[MT_CONV2D_STRIDE_H], a[MT_CONV2D_PAD_TOP], h);
  cols = mt_lead(0, wo - 1, co, c, a[MT_CONV2D_STRIDE_W], a[MT_CONV2D_PAD_LEFT], wd) + co;
  next = mt_lead(1, ho, wo * co, wd * c, a[MT_CONV2D_STRIDE_H], a[MT_CONV2D_PAD_TOP], h);
  rows = img + (rows + cols > next ? rows + cols : next);
  return rows > 0 ? rows : 0;
}

/* validate.py _check_alias (ops.ALIAS_KINDS): an output meets no other output or the scratch, nor
 * an input unless exactly its bytes and the input is `first` or later (INPLACE: any; RESIDUAL: the
 * last, the skip), or (OVERLAP) x in one arena region at least mt_overlap_delta bytes above it;
 * the scratch meets no input. Delegates are exempt. Linear in the operands. */
static mt_status mt_check_alias(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const uint32_t alias = mt_op_table[op->opcode].alias, n = (uint32_t)op->n_inputs + op->n_outputs;
  uint32_t k, j, first = (alias & MT_ALIAS_INPLACE) ? 0u : (uint32_t)op->n_inputs - 1u;
  first = (alias & (MT_ALIAS_INPLACE | MT_ALIAS_RESIDUAL)) ? first : op->n_inputs;
  for (k = op->n_inputs; k < n && !(alias & MT_ALIAS_DELEGATE); k++) {
    const mt_tensor_t *y = &m->tensors[in[k]];
    for (j = 0; j < k; j++) {
      const mt_tensor_t *x = &m->tensors[in[j]];
      MT_REQUIRE(!mt_meet(x, y->storage, y->region, y->offset, mt_extent(y)) ||
                     (j >= first && j < op->n_inputs && x->storage == y->storage &&
                      x->region == y->region && x->offset == y->offset && x->size == y->size) ||
                     (j == 0 && (alias & MT_ALIAS_OVERLAP) && x->storage == MT_STORAGE_ARENA &&
                      x->storage == y->storage && x->region == y->region &&
                      (int64_t)x->offset - (int64_t)y->offset >= mt_overlap_delta(m, op, in)),
                 MT_ERR_BAD_OP);
    }
  }
  for (k = 0; k < n && !(alias & MT_ALIAS_DELEGATE) && op->scratch_region != MT_NONE16; k++) {
    MT_REQUIRE(!mt_meet(&m->tensors[in[k]], MT_STORAGE_ARENA, op->scratch_region,
                        op->scratch_offset, op->scratch_size),
               MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* MAC operand k: a constant of `dtype` and rank >= 1 (else NULL). */
static const mt_tensor_t *mt_mac_const(const mt_model *m, const int32_t *in, int k, uint32_t dtype)
{
  const mt_tensor_t *t = &m->tensors[in[k]];
  return t->storage == MT_STORAGE_CONST && t->dtype == dtype && t->rank >= 1 ? t : NULL;
}

/* |v| <= bound (2^31 or 2^47) and rq(v) = (v * mult + 2^(shift-1)) >> shift fits int32 (v
 * first: then no int64 overflow while mult < 2^31, or 2^15 for the int48 bound). */
static int mt_rq_fits(int64_t v, int64_t mult, int32_t shift, int64_t bound)
{
  int64_t r;
  if (v < -bound - (bound == INT32_MAX) || v > bound) {
    return 0;
  }
  r = (v * mult + ((int64_t)1 << (shift - 1))) >> shift;
  return r >= INT32_MIN && r <= INT32_MAX;
}

/* validate.py _check_mac_range: weight int8 and bias/mult/shift int32 constants, one of each
 * per output channel; for every channel, the accumulator bias + sum((x - zp) * w) over all int8
 * x, and its rq, fit int32 (docs/numerics.md, Domain). An int16 x (section 6): an int64 bias,
 * zp 0, mult < 2^15 and the accumulator within +-(2^47 - 1). One pass over the weights. */
static mt_status mt_check_mac(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const uint32_t mac = mt_op_table[op->opcode].mac;
  const int wide = m->tensors[in[0]].dtype == MT_DTYPE_INT16;
  const mt_tensor_t *w = mt_mac_const(m, in, 1, MT_DTYPE_INT8), *t[3];
  const int8_t *wd;
  const int32_t *q[3];
  const int64_t x_lo = wide ? -32768 : -128, x_hi = wide ? 32767 : 127;
  const int64_t a_lo = wide ? -MT_INT48_MAX : INT32_MIN, a_hi = wide ? MT_INT48_MAX : INT32_MAX;
  uint32_t k, c, n_c, n_k, step_c, step_k;
  int32_t zp;
  if (mac == 0) {
    return MT_STATUS_OK;
  }
  MT_REQUIRE(w != NULL, MT_ERR_BAD_OP);
  n_c = w->shape[MT_MAC_AXIS(mac) == MT_MAC_AXIS_FIRST ? 0 : w->rank - 1];
  for (k = 0; k < 3; k++) {
    t[k] = mt_mac_const(m, in, (int)k + 2, wide && k == 0 ? MT_DTYPE_INT64 : MT_DTYPE_INT32);
    MT_REQUIRE(t[k] != NULL && t[k]->size / mt_dtype_bytes(t[k]->dtype) == n_c, MT_ERR_BAD_OP);
    q[k] = (const int32_t *)(const void *)(m->constants + t[k]->offset); /* 16-aligned */
  }
  zp =
      MT_MAC_ZP_FOLDED_IN(mac, op->variant) ? 0 : m->attrs[op->first_attr + MT_MAC_ZP_ATTR_OF(mac)];
  MT_REQUIRE(zp >= -128 && zp <= 127 && !(wide && zp != 0), MT_ERR_BAD_OP);
  n_k = n_c != 0 ? w->size / n_c : 0;
  step_c = MT_MAC_AXIS(mac) == MT_MAC_AXIS_FIRST ? n_k : 1;
  step_k = MT_MAC_AXIS(mac) == MT_MAC_AXIS_FIRST ? 1 : n_c;
  wd = (const int8_t *)(const void *)(m->constants + w->offset);
  for (c = 0; c < n_c; c++) {
    int64_t pos = 0, neg = 0, lo, hi;
    const int64_t bias = wide ? ((const int64_t *)(const void *)q[0])[c] : q[0][c];
    const int32_t mult = q[1][c], shift = q[2][c];
    for (k = 0; k < n_k; k++) {
      const int32_t v = wd[c * step_c + k * step_k];
      pos += v > 0 ? v : 0;
      neg += v < 0 ? v : 0;
    }
    MT_REQUIRE(mult >= 0 && (!wide || mult <= 32767) && shift >= 2 && shift <= 62, MT_ERR_BAD_OP);
    hi = (x_hi - zp) * pos + (x_lo - zp) * neg + bias;
    lo = (x_lo - zp) * pos + (x_hi - zp) * neg + bias;
    MT_REQUIRE(lo >= a_lo && hi <= a_hi && mt_rq_fits(lo, mult, shift, a_hi) &&
                   mt_rq_fits(hi, mult, shift, a_hi),
               MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* validate.py _check_gather: the indices are a constant int32 vector whose entries all lie in
 * x's gathered dim (the kernel checks them again before it writes). */
static mt_status mt_check_gather(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const mt_tensor_t *x = &m->tensors[in[0]], *t = mt_mac_const(m, in, 1, MT_DTYPE_INT32);
  const int64_t axis = (int64_t)m->attrs[op->first_attr + MT_GATHER_AXIS] - 6 + x->rank;
  uint32_t j;
  MT_REQUIRE(t != NULL && t->rank == 1 && axis >= 0 && axis < x->rank, MT_ERR_BAD_OP);
  for (j = 0; j < t->shape[0]; j++) {
    const int32_t v = ((const int32_t *)(const void *)(m->constants + t->offset))[j];
    MT_REQUIRE(v >= 0 && (uint32_t)v < x->shape[axis], MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* validate.py _check_matmul: |acc| <= K * 255 * 255 and its rq fit int32 (two activations);
 * int16 (section 6): K * 2^30 within int48, zero points 0 and a 16-bit multiplier. */
static mt_status mt_check_matmul(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const mt_tensor_t *a = &m->tensors[in[0]];
  const int32_t *at = m->attrs + op->first_attr, shift = at[MT_MATMUL_SHIFT],
                w = a->dtype == MT_DTYPE_INT16;
  const int64_t k = a->rank >= 1 ? (int64_t)a->shape[a->rank - 1] : 0,
                top = w ? MT_INT48_MAX : INT32_MAX;
  const int64_t bound = w ? k << 30 : k * 255 * 255;
  const int ok =
      at[MT_MATMUL_MULT] >= 0 && shift >= 2 && shift <= 62 &&
      mt_rq_fits(bound, at[MT_MATMUL_MULT], shift, top) &&
      (!w || (at[MT_MATMUL_MULT] <= 32767 && (at[MT_MATMUL_A_ZP] | at[MT_MATMUL_B_ZP]) == 0));
  return ok && mt_rq_fits(-bound, at[MT_MATMUL_MULT], shift, top) ? MT_STATUS_OK
                                                                  : (mt_status)MT_ERR_BAD_OP;
}

/* validate.py _check_recurrent: lstm / gru / rnn_*'s shapes (x [B, T, G*H], weight [G*H, H],
 * states [B, H], y [B, steps, H]), the steps inside T, constant tables (and bias_n) of x's dtype,
 * scratch for one step's gates. in[5.. first]: the states; then gru's bias_n; then the tables. */
static mt_status mt_check_recurrent(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const int lstm = op->opcode == MT_OP_LSTM, gru = op->opcode == MT_OP_GRU;
  const mt_tensor_t *x = &m->tensors[in[0]], *w = &m->tensors[in[1]], *y;
  const int32_t *at = m->attrs + op->first_attr;
  const uint32_t steps = (uint32_t)at[0], start = (uint32_t)at[1], t_n = x->shape[1];
  const uint32_t g = lstm ? 4u : gru ? 3u : 1u, h = w->shape[1], b = x->shape[0];
  const uint32_t n = op->n_inputs + op->n_outputs, e = x->dtype == MT_DTYPE_INT16 ? 2u : 1u;
  uint32_t k;
  y = &m->tensors[in[op->n_inputs]];
  /* a negative start or steps is a huge uint32: refused by start < T, steps <= T - start */
  MT_REQUIRE(x->rank == 3 && w->rank == 2 && h >= 1 && (uint64_t)g * h == x->shape[2] &&
                 w->shape[0] == x->shape[2] && y->rank == 3 && y->shape[0] == b &&
                 y->shape[1] == steps && y->shape[2] == h && (at[2] == 0 || at[2] == 1) &&
                 start < t_n && steps >= 1 && steps <= (at[2] ? start + 1 : t_n - start) &&
                 op->scratch_size >= x->size / t_n && op->scratch_region != MT_NONE16,
             MT_ERR_BAD_OP);
  for (k = 5; k < n; k++) { /* states: [B, H]; bias_n: [H]; tables: 256 or 513 entries */
    const mt_tensor_t *t = &m->tensors[in[k == op->n_inputs ? 5 : k]]; /* (y: checked above) */
    const int state = k < 6u + lstm || k >= op->n_inputs, bn = gru && k == 6;
    const uint32_t len = bn ? h : e == 2 ? 513u : 256u;
    MT_REQUIRE(state ? t->rank == 2 && t->shape[0] == b && t->shape[1] == h
                     : t->storage == MT_STORAGE_CONST && t->dtype == x->dtype && t->rank == 1 &&
                           t->shape[0] == len,
               MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* validate.py _check_dtypes: the activation inputs (MT_<OP>_ACT_INPUTS) share a dtype, the
 * outputs another, and the pair is one of MT_<OP>_DTYPES (ops.OpDef.dtypes; 0 = unchecked). */
static mt_status mt_check_dtypes(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const uint32_t rule[2] = {mt_op_table[op->opcode].dtypes, mt_op_table[op->opcode].act_inputs};
  const uint32_t n = (uint32_t)op->n_inputs + op->n_outputs;
  uint32_t k, d[2] = {MT_DTYPE_COUNT, MT_DTYPE_COUNT}; /* MT_DTYPE_COUNT <= 6: pairs fit 32 bits */
  for (k = 0; k < n && rule[0] != 0; k++) {
    const uint32_t out = k >= op->n_inputs, t = m->tensors[in[k]].dtype;
    if (out || rule[1] == MT_ACT_ALL || (k < 32 && ((rule[1] >> k) & 1u))) {
      MT_REQUIRE(d[out] == MT_DTYPE_COUNT || d[out] == t, MT_ERR_BAD_OP);
      d[out] = t;
    }
  }
  MT_REQUIRE(rule[0] == 0 || (d[0] < MT_DTYPE_COUNT && (rule[0] & MT_DTYPE_PAIR(d[0], d[1]))),
             MT_ERR_BAD_OP);
  return MT_STATUS_OK;
}

/* validate.py _check_ring: only ring_write writes a ring window; its x is one frame of it. */
static mt_status mt_check_ring(const mt_model *m, const mt_op_t *op, const int32_t *in)
{
  const mt_tensor_t *x, *y;
  uint32_t k;
  if (op->opcode != MT_OP_RING_WRITE) {
    for (k = 0; k < op->n_outputs; k++) {
      MT_REQUIRE(!(m->tensors[in[op->n_inputs + k]].flags & MT_TENSOR_FLAG_RING), MT_ERR_BAD_OP);
    }
    return MT_STATUS_OK;
  }
  x = &m->tensors[in[0]]; /* one input, one output (counts checked) */
  y = &m->tensors[in[1]];
  MT_REQUIRE((y->flags & MT_TENSOR_FLAG_RING) && !(x->flags & MT_TENSOR_FLAG_RING) &&
                 m->attrs[op->first_attr + MT_RING_WRITE_SLOTS] == (int32_t)mt_ring_slots(y) &&
                 (uint64_t)x->size * mt_ring_slots(y) == y->size,
             MT_ERR_BAD_OP);
  return MT_STATUS_OK;
}

static mt_status mt_check_op(const mt_model *m, uint32_t i)
{
  const mt_op_t *op = &m->ops[i];
  const mt_op_counts *c = &mt_op_table[op->opcode];
  const int32_t *in = m->operands + op->first_operand, *out = in + op->n_inputs;
  uint32_t k;
  MT_TRY(mt_check_operands(m, in, op->n_inputs, c->n_inputs));
  MT_TRY(mt_check_operands(m, out, op->n_outputs, c->n_outputs));
  for (k = 0; k < op->n_outputs; k++) {
    MT_REQUIRE(m->tensors[out[k]].storage != MT_STORAGE_CONST, MT_ERR_BAD_OP);
  }
  MT_TRY(mt_check_dtypes(m, op, in));
  if (op->scratch_region != MT_NONE16) {
    MT_TRY(
        mt_check_area(m, op->scratch_region, op->scratch_offset, op->scratch_size, MT_ERR_BAD_OP));
  }
  if (op->opcode == MT_OP_DELEGATE) {
    MT_TRY(mt_check_delegate_op(m, i, in));
  }
  MT_TRY(mt_check_alias(m, op, in));
  MT_TRY(mt_check_mac(m, op, in));
  MT_TRY(op->opcode == MT_OP_GATHER                                 ? mt_check_gather(m, op, in)
         : op->opcode == MT_OP_MATMUL                               ? mt_check_matmul(m, op, in)
         : op->opcode >= MT_OP_LSTM && op->opcode <= MT_OP_RNN_RELU ? mt_check_recurrent(m, op, in)
                                                                    : MT_STATUS_OK);
  return mt_check_ring(m, op, in);
}

/* reader.py _check_op_flags: an op is marked SUBGRAPH exactly when it is in a CPU version. The
 * CPU versions are disjoint (mt_check_cpu_ops), so this holds when every op of every CPU version
 * is marked and there are as many marked ops as CPU version ops: linear in ops + delegates. */
static mt_status mt_check_op_flags(const mt_model *m)
{
  uint32_t i, k, marked = 0, in_versions = 0;
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    int ring = 0; /* RING exactly on the ops with a ring window operand */
    marked += (op->flags & MT_OP_FLAG_SUBGRAPH) != 0;
    for (k = 0; k < (uint32_t)op->n_inputs + op->n_outputs; k++) {
      ring |= (m->tensors[m->operands[op->first_operand + k]].flags & MT_TENSOR_FLAG_RING) != 0;
    }
    MT_REQUIRE(ring == ((op->flags & MT_OP_FLAG_RING) != 0), MT_ERR_BAD_OP);
  }
  for (k = 0; k < m->n_delegates; k++) {
    const mt_delegate_t *d = &m->delegates[k];
    for (i = 0; d->cpu_first_op != MT_NONE32 && i < d->cpu_n_ops; i++) {
      MT_REQUIRE(m->ops[d->cpu_first_op + i].flags & MT_OP_FLAG_SUBGRAPH, MT_ERR_BAD_OP);
    }
    in_versions += d->cpu_first_op != MT_NONE32 ? d->cpu_n_ops : 0;
  }
  MT_REQUIRE(marked == in_versions, MT_ERR_BAD_OP);
  return MT_STATUS_OK;
}

/* Program inputs/outputs: distinct arena tensors, at least one output, at most MT_MAX_IO of
 * each. Every failure here is bad_io, so the order of the checks within this step does not
 * change the verdict. */
static mt_status mt_check_io_list(const mt_model *m, const int32_t *idx, uint32_t n)
{
  uint32_t i, j;
  MT_REQUIRE(n <= MT_MAX_IO, MT_ERR_BAD_IO); /* so the duplicate check is cheap */
  for (i = 0; i < n; i++) {
    MT_REQUIRE(idx[i] >= 0 && (uint32_t)idx[i] < m->n_tensors, MT_ERR_BAD_IO);
    MT_REQUIRE(m->tensors[idx[i]].storage == MT_STORAGE_ARENA, MT_ERR_BAD_IO);
    for (j = 0; j < i; j++) {
      MT_REQUIRE(idx[i] != idx[j], MT_ERR_BAD_IO);
    }
  }
  return MT_STATUS_OK;
}

/* validate.py check_persistent: one record per persistent tensor; initial values 16-aligned
 * ranges of CONST; neither tensors nor initial values overlap (quadratic in <= 256 records). */
static mt_status mt_check_persistent(const mt_model *m)
{
  uint32_t k, j, i, n = 0;
  uint64_t packed = 0, end = 0;
  int32_t pos;
  MT_REQUIRE(m->n_persistent <= MT_MAX_PERSISTENT, MT_ERR_BAD_PERSISTENT);
  for (k = 0; k < m->n_persistent; k++) {
    const mt_persistent_t *r = &m->persistent[k];
    const mt_tensor_t *t;
    MT_REQUIRE(r->tensor >= 0 && (uint32_t)r->tensor < m->n_tensors, MT_ERR_BAD_PERSISTENT);
    t = &m->tensors[r->tensor];
    MT_REQUIRE(t->storage == MT_STORAGE_PERSISTENT, MT_ERR_BAD_PERSISTENT);
    MT_REQUIRE(r->init_offset % MT_ALIGN == 0 &&
                   (uint64_t)r->init_offset + mt_extent(t) <= m->const_size,
               MT_ERR_BAD_PERSISTENT);
    if (t->flags & MT_TENSOR_FLAG_RING) { /* its initial position (the block's first bytes) */
      memcpy(&pos, m->constants + r->init_offset, sizeof pos);
      MT_REQUIRE(pos >= 0 && (uint32_t)pos < mt_ring_slots(t), MT_ERR_BAD_PERSISTENT);
    }
    for (j = 0; j < k; j++) {
      const mt_persistent_t *q = &m->persistent[j];
      const mt_tensor_t *u = &m->tensors[q->tensor];
      MT_REQUIRE(r->tensor != q->tensor, MT_ERR_BAD_PERSISTENT);
      MT_REQUIRE(!mt_meet(t, u->storage, u->region, u->offset, mt_extent(u)),
                 MT_ERR_BAD_PERSISTENT);
      MT_REQUIRE(t->size == 0 || u->size == 0 ||
                     (uint64_t)r->init_offset >= (uint64_t)q->init_offset + mt_extent(u) ||
                     (uint64_t)q->init_offset >= (uint64_t)r->init_offset + mt_extent(t),
                 MT_ERR_BAD_PERSISTENT);
    }
    packed += (mt_extent(t) + MT_ALIGN - 1) / MT_ALIGN * MT_ALIGN;
    end = (uint64_t)t->offset + mt_extent(t) > end ? (uint64_t)t->offset + mt_extent(t) : end;
  }
  MT_REQUIRE(end <= packed, MT_ERR_BAD_PERSISTENT); /* bounded by CONST: see validate.py */
  for (i = 0; i < m->n_tensors; i++) {
    n += m->tensors[i].storage == MT_STORAGE_PERSISTENT;
  }
  MT_REQUIRE(n == m->n_persistent, MT_ERR_BAD_PERSISTENT); /* distinct, so each has one */
  return MT_STATUS_OK;
}

/* Lifetimes (validate.py check_lifetimes; schema.py, "Validation"). In each run order (the
 * NPU's: every op outside the CPU versions; and, when a delegate has one, the fallback's: each
 * such delegate op replaced by its CPU version, as mt_invoke runs them) an arena tensor is live
 * from its first writer (an input: program start) to its last reader (an output: program end),
 * an op's scratch and a delegate's Vela scratch during their op. A tensor no op of the run writes
 * nor the caller is a view: live from the latest write of exactly its bytes before its first
 * read (none: refused). Live ranges whose bytes meet share at most the op where one ends and the
 * other begins (mt_check_alias judged it), or are a view and what it views (same bytes, same
 * start); no tensor is read before its writer. With no memory for every range, MT_LIFE_SLOTS
 * arena tensors at a time: per run, for A arena tensors, (A / 16 + 1) (A / 32 + 2) passes of
 * O(tensors + operands + 16 (ops + io)) and A^2 / 2 pairs; 2 x 212 B of stack. */
#define MT_LIFE_SLOTS   16
#define MT_LIFE_WRITTEN 1u
#define MT_LIFE_VIEW    2u

typedef struct {
  uint32_t n, tensor[MT_LIFE_SLOTS]; /* ascending tensor indices */
  uint32_t first[MT_LIFE_SLOTS], last[MT_LIFE_SLOTS]; /* steps: 0 start, 1..N ops, N + 1 end */
  uint8_t flags[MT_LIFE_SLOTS]; /* 0: not live (yet) */
} mt_life;

/* The next op of the run (validated: CPU versions in range, not delegates, SUBGRAPH flags);
 * c[0]: the next program op, [c[1], c[2]): CPU version ops still to run. */
static int mt_next_op(const mt_model *m, int fallback, uint32_t c[3], uint32_t *op)
{
  while (c[1] == c[2] && c[0] < m->n_ops) {
    const mt_op_t *o = &m->ops[c[0]++];
    const mt_delegate_t *d = o->opcode == MT_OP_DELEGATE
                                 ? &m->delegates[m->attrs[o->first_attr + MT_DELEGATE_INDEX]]
                                 : NULL;
    if (o->flags & MT_OP_FLAG_SUBGRAPH) {
      continue;
    }
    if (!fallback || d == NULL || d->cpu_first_op == MT_NONE32) {
      *op = c[0] - 1;
      return 1;
    }
    c[1] = d->cpu_first_op;
    c[2] = d->cpu_first_op + d->cpu_n_ops;
  }
  if (c[1] == c[2]) {
    return 0;
  }
  *op = c[1]++;
  return 1;
}

/* Tensor t read (write = 0) or written at `step`: a read of a tensor not yet written makes it a
 * view of the latest write of its bytes; a write of an untouched tensor's bytes is that write. */
static mt_status mt_life_event(const mt_model *m, mt_life *l, uint32_t t, uint32_t step, int write)
{
  const mt_tensor_t *x = &m->tensors[t];
  uint32_t k;
  for (k = 0; k < l->n && x->storage == MT_STORAGE_ARENA; k++) {
    const mt_tensor_t *y = &m->tensors[l->tensor[k]];
    if (l->tensor[k] == t) {
      MT_REQUIRE(write ? !(l->flags[k] & MT_LIFE_VIEW) : l->flags[k] || l->first[k] != UINT32_MAX,
                 MT_ERR_BAD_OP);
      l->first[k] = l->flags[k] == 0 && write ? step : l->first[k];
      l->flags[k] = l->flags[k] != 0 ? l->flags[k] : write ? MT_LIFE_WRITTEN : MT_LIFE_VIEW;
      l->last[k] = step;
    } else if (write && l->flags[k] == 0 && x->region == y->region && x->offset == y->offset &&
               x->size == y->size) {
      l->first[k] = step;
    }
  }
  return MT_STATUS_OK;
}

/* An area of `region` written during `step` meets no tensor of l live across it. */
static mt_status mt_life_area(const mt_model *m, const mt_life *l, uint32_t step, uint32_t region,
                              uint32_t offset, uint32_t size)
{
  uint32_t k;
  for (k = 0; region != MT_NONE16 && k < l->n; k++) {
    MT_REQUIRE(l->flags[k] == 0 || l->first[k] >= step || step >= l->last[k] ||
                   !mt_meet(&m->tensors[l->tensor[k]], MT_STORAGE_ARENA, region, offset, size),
               MT_ERR_BAD_OP);
  }
  return MT_STATUS_OK;
}

/* One pass over the run: l's ranges from arena tensor `from` on (areas = 0; `*next`: the index
 * after them), or (areas = 1) every op's and Vela's scratch against them. */
static mt_status mt_life_pass(const mt_model *m, int fallback, mt_life *l, uint32_t from,
                              uint32_t *next, int areas)
{
  uint32_t c[3] = {0, 0, 0}, i, k, step = 0;
  for (l->n = areas ? l->n : 0; !areas && from < m->n_tensors && l->n < MT_LIFE_SLOTS; from++) {
    l->tensor[l->n] = from;
    l->first[l->n] = UINT32_MAX;
    l->flags[l->n] = 0;
    l->n += m->tensors[from].storage == MT_STORAGE_ARENA;
  }
  *next = from;
  for (k = 0; k < m->n_inputs && !areas; k++) {
    MT_TRY(mt_life_event(m, l, (uint32_t)m->io[k], 0, 1));
  }
  while (mt_next_op(m, fallback, c, &i)) {
    const mt_op_t *op = &m->ops[i];
    step++;
    for (k = 0; k < (uint32_t)op->n_inputs + op->n_outputs && !areas; k++) {
      MT_TRY(mt_life_event(m, l, (uint32_t)m->operands[op->first_operand + k], step,
                           k >= op->n_inputs));
    }
    if (areas) {
      MT_TRY(mt_life_area(m, l, step, op->scratch_region, op->scratch_offset, op->scratch_size));
    }
    if (areas && op->opcode == MT_OP_DELEGATE) {
      const mt_delegate_t *d = &m->delegates[m->attrs[op->first_attr + MT_DELEGATE_INDEX]];
      MT_TRY(mt_life_area(m, l, step, d->scratch_region, d->scratch_offset, d->scratch_size));
      MT_TRY(mt_life_area(m, l, step, d->fast_scratch_region, d->fast_scratch_offset,
                          d->fast_scratch_size));
    }
  }
  for (k = 0; k < m->n_outputs && !areas; k++) {
    MT_TRY(mt_life_event(m, l, (uint32_t)m->io[m->n_inputs + k], step + 1, 0));
  }
  return MT_STATUS_OK;
}

/* Slot i of a and slot j of b: live at a common op other than a handover, their bytes meeting,
 * and not a view beside what it views. */
static int mt_life_clash(const mt_model *m, const mt_life *a, uint32_t i, const mt_life *b,
                         uint32_t j)
{
  const mt_tensor_t *x = &m->tensors[a->tensor[i]], *y = &m->tensors[b->tensor[j]];
  const uint32_t fa = a->first[i], la = a->last[i], fb = b->first[j], lb = b->last[j];
  return a->flags[i] != 0 && b->flags[j] != 0 && fa <= lb && fb <= la && la != fb && lb != fa &&
         !(fa == fb && ((a->flags[i] | b->flags[j]) & MT_LIFE_VIEW) && x->region == y->region &&
           x->offset == y->offset && x->size == y->size) &&
         mt_meet(x, y->storage, y->region, y->offset, y->size);
}

/* Each chunk a of the run's ranges against itself and every chunk before it (b). */
static mt_status mt_check_lifetimes(const mt_model *m, int fallback)
{
  mt_life a, b;
  const mt_life *o;
  uint32_t from, next, at, after, k, j;
  for (from = 0; from < m->n_tensors; from = next) {
    MT_TRY(mt_life_pass(m, fallback, &a, from, &next, 0));
    MT_TRY(mt_life_pass(m, fallback, &a, from, &at, 1));
    for (at = 0, o = &b; o == &b; at = after) {
      o = at < from ? &b : &a;
      after = from;
      if (o == &b) {
        MT_TRY(mt_life_pass(m, fallback, &b, at, &after, 0));
      }
      for (k = 0; k < a.n; k++) {
        for (j = 0; j < (o == &a ? k : b.n); j++) {
          MT_REQUIRE(!mt_life_clash(m, &a, k, o, j), MT_ERR_BAD_OP);
        }
      }
    }
  }
  return MT_STATUS_OK;
}

/* Switches the CPU takes and its ISA level without switches (mt_program.h, from targets.py). */
static const uint8_t mt_cpu_switches[MT_CPU_COUNT] = {
#define MT_CPU_SWITCHES(name, id, switches, isa) [id] = (uint8_t)(switches),
    MT_CPU_LIST(MT_CPU_SWITCHES)
#undef MT_CPU_SWITCHES
};
static const uint8_t mt_cpu_isa[MT_CPU_COUNT] = {
#define MT_CPU_ISA(name, id, switches, isa) [id] = (uint8_t)(isa),
    MT_CPU_LIST(MT_CPU_ISA)
#undef MT_CPU_ISA
};

/* validate.py check_target: single rounding (tflite is reserved); no program flags; switches the
 * CPU takes; the ISA level they give (+nomve lowers mve to dsp, then +nodsp dsp to scalar). Ids
 * are in range (mt_load.c). */
static mt_status mt_check_target(const mt_target_t *t)
{
  uint32_t isa = mt_cpu_isa[t->cpu];
  MT_REQUIRE(t->rounding == MT_ROUNDING_SINGLE && t->flags == 0, MT_ERR_BAD_TARGET);
  MT_REQUIRE((t->switches & ~(uint32_t)mt_cpu_switches[t->cpu]) == 0, MT_ERR_BAD_TARGET);
  if ((t->switches & MT_TARGET_SWITCH_NOMVE) && isa == MT_ISA_MVE) {
    isa = MT_ISA_DSP;
  }
  if ((t->switches & MT_TARGET_SWITCH_NODSP) && isa == MT_ISA_DSP) {
    isa = MT_ISA_SCALAR;
  }
  MT_REQUIRE(t->isa == isa, MT_ERR_BAD_TARGET);
  return MT_STATUS_OK;
}

mt_status mt_validate_program(const mt_model *m)
{
  uint32_t i;
  int fallback;
  MT_TRY(mt_check_target(m->target));
  MT_TRY(mt_check_regions(m));
  for (i = 0; i < m->n_tensors; i++) {
    MT_TRY(mt_check_tensor(m, &m->tensors[i]));
  }
  for (i = 0; i < m->n_delegates; i++) {
    MT_TRY(mt_check_delegate(m, i));
  }
  for (i = 0; i < m->n_ops; i++) {
    MT_TRY(mt_check_op(m, i));
  }
  MT_REQUIRE(m->n_outputs >= 1, MT_ERR_BAD_IO);
  MT_TRY(mt_check_io_list(m, m->io, m->n_inputs));
  MT_TRY(mt_check_io_list(m, m->io + m->n_inputs, m->n_outputs));
  MT_TRY(mt_check_persistent(m));
  MT_TRY(mt_check_op_flags(m)); /* the run orders below follow the SUBGRAPH flags */
  for (i = 0, fallback = 0; i < m->n_delegates; i++) {
    fallback |= m->delegates[i].cpu_first_op != MT_NONE32;
  }
  MT_TRY(mt_check_lifetimes(m, 0));
  return fallback ? mt_check_lifetimes(m, 1) : MT_STATUS_OK;
}
