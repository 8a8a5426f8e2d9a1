/* fuzz_mutator.c - a structure-aware libFuzzer mutator for mcutorch program files.
 *
 * Linked next to a fuzz target (fuzz_invoke.c), it replaces libFuzzer's byte mutations: it finds
 * the records through the file's own section table (the structs of mt_program.h) and changes
 * what the validator and the kernels read - a field of a TENSOR / OP / REGION / DELEGATE /
 * BINDING / TARGET / IO record, an ATTRS or OPERANDS int, a section table entry, CONST bytes,
 * whole records copied over others - to values that sit on the edges of the checks (0, 1, -1,
 * INT32_MAX, NONE16, region and CONST sizes, other tensors' indices, offsets and sizes, ...).
 * Then it sets file_size and the CRC, so every mutated file passes the header checks and the
 * loader is built without MT_SKIP_CRC: files the fuzzer keeps are real programs that the Python
 * reader reads too (tests/py/fuzzing.py replays them through both executors).
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iruntime/include ... tests/c/fuzz_invoke.c \
 *       tests/c/fuzz_mutator.c (runtime, port and kernel sources) -o fuzz
 *   ./fuzz -max_total_time=60 corpus/ seeds/
 *
 * (tests/py/fuzzing.py builds it, 64- and 32-bit, and runs it.) */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mt_program.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2,
                                 size_t size2, uint8_t *out, size_t max_out_size,
                                 unsigned int seed);

#define FM_KINDS (MT_SECTION_PERSISTENT + 1)

/* ---- little-endian field access (files are not aligned in libFuzzer's buffers) ---- */

static uint32_t fm_get(const uint8_t *p, uint32_t width)
{
  uint32_t v = 0, k;
  for (k = 0; k < width; k++) {
    v |= (uint32_t)p[k] << (8 * k);
  }
  return v;
}

static void fm_put(uint8_t *p, uint32_t width, uint32_t v)
{
  uint32_t k;
  for (k = 0; k < width; k++) {
    p[k] = (uint8_t)(v >> (8 * k));
  }
}

/* ---- the CRC the header needs (zlib's, byte table) ---- */

static uint32_t fm_crc_table[256];

static uint32_t fm_crc32(const uint8_t *p, size_t n)
{
  uint32_t crc = 0xFFFFFFFFu;
  if (fm_crc_table[1] == 0) {
    uint32_t i, k, c;
    for (i = 0; i < 256; i++) {
      for (c = i, k = 0; k < 8; k++) {
        c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      }
      fm_crc_table[i] = c;
    }
  }
  while (n-- != 0) {
    crc = fm_crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
  }
  return ~crc;
}

/* file_size and crc32 for the bytes as they are now. */
static void fm_seal(uint8_t *data, size_t size)
{
  if (size >= MT_HEADER_RECORD_SIZE) {
    fm_put(data + offsetof(mt_header_t, file_size), 4, (uint32_t)size);
    fm_put(data + offsetof(mt_header_t, crc32), 4,
           fm_crc32(data + MT_CRC_START, size - MT_CRC_START));
  }
}

/* ---- random numbers: libFuzzer's seed, then xorshift ---- */

typedef struct {
  uint32_t s;
} fm_rng;

static uint32_t fm_next(fm_rng *r)
{
  uint32_t x = r->s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  r->s = x;
  return x;
}

static uint32_t fm_below(fm_rng *r, uint32_t n) /* [0, n), n >= 1 */
{
  return n <= 1 ? 0 : fm_next(r) % n;
}

/* ---- the file's layout, from its section table ---- */

typedef struct {
  uint32_t offset, size; /* size 0: absent */
} fm_span;

typedef struct {
  uint8_t *data;
  uint32_t size;
  uint32_t table, count; /* section table offset and entries (bounded by the file) */
  fm_span sec[FM_KINDS]; /* the first section of each known kind that lies inside the file */
} fm_file;

static uint32_t fm_records(const fm_file *f, uint32_t kind, uint32_t unit)
{
  return f->sec[kind].size / unit;
}

/* Parse what can be parsed; returns 0 when not even a section table is there. */
static int fm_parse(fm_file *f, uint8_t *data, size_t size)
{
  uint32_t i;
  memset(f, 0, sizeof *f);
  f->data = data;
  f->size = (uint32_t)size;
  if (size < MT_HEADER_RECORD_SIZE || size > 0x7FFFFFFFu) {
    return 0;
  }
  f->table = fm_get(data + offsetof(mt_header_t, section_table), 4);
  f->count = fm_get(data + offsetof(mt_header_t, section_count), 4);
  if (f->count > MT_MAX_SECTIONS || f->table < MT_HEADER_RECORD_SIZE ||
      (uint64_t)f->table + (uint64_t)f->count * MT_SECTION_RECORD_SIZE > size) {
    f->count = 0;
    return 0;
  }
  for (i = 0; i < f->count; i++) {
    const uint8_t *e = data + f->table + i * MT_SECTION_RECORD_SIZE;
    uint32_t kind = fm_get(e + offsetof(mt_section_t, kind), 2);
    uint32_t off = fm_get(e + offsetof(mt_section_t, offset), 4);
    uint32_t n = fm_get(e + offsetof(mt_section_t, size), 4);
    if (kind < FM_KINDS && f->sec[kind].size == 0 && (uint64_t)off + n <= size) {
      f->sec[kind].offset = off;
      f->sec[kind].size = n;
    }
  }
  return 1;
}

/* ---- record descriptions: every field, by offset and width ---- */

typedef struct {
  uint16_t offset, width;
} fm_field;

#define FM_F(type, field)                                                                          \
  {                                                                                                \
    offsetof(type, field), sizeof(((type *)0)->field)                                              \
  }
#define FM_A(type, field, k)                                                                       \
  {                                                                                                \
    offsetof(type, field) + 4 * (k), 4                                                             \
  }
#define FM_N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const fm_field fm_header_fields[] = {
    FM_F(mt_header_t, version_major), FM_F(mt_header_t, version_minor), FM_F(mt_header_t, flags),
    FM_F(mt_header_t, section_count), FM_F(mt_header_t, section_table), FM_F(mt_header_t, reserved),
};
static const fm_field fm_section_fields[] = {
    FM_F(mt_section_t, kind), FM_F(mt_section_t, flags),    FM_F(mt_section_t, offset),
    FM_F(mt_section_t, size), FM_F(mt_section_t, reserved),
};
static const fm_field fm_target_fields[] = {
    FM_F(mt_target_t, cpu),       FM_F(mt_target_t, npu),      FM_F(mt_target_t, isa),
    FM_F(mt_target_t, rounding),  FM_F(mt_target_t, switches), FM_F(mt_target_t, flags),
    FM_F(mt_target_t, reserved2),
};
static const fm_field fm_region_fields[] = {
    {offsetof(mt_region_t, name), 4}, {offsetof(mt_region_t, name) + 4, 4},
    FM_F(mt_region_t, size),          FM_F(mt_region_t, capacity),
    FM_F(mt_region_t, base),          FM_F(mt_region_t, alignment),
    FM_F(mt_region_t, rank),          FM_F(mt_region_t, flags),
    FM_F(mt_region_t, reserved),
};
static const fm_field fm_tensor_fields[] = {
    FM_F(mt_tensor_t, dtype),      FM_F(mt_tensor_t, rank),     FM_F(mt_tensor_t, storage),
    FM_F(mt_tensor_t, flags),      FM_F(mt_tensor_t, region),   FM_F(mt_tensor_t, reserved),
    FM_A(mt_tensor_t, shape, 0),   FM_A(mt_tensor_t, shape, 1), FM_A(mt_tensor_t, shape, 2),
    FM_A(mt_tensor_t, shape, 3),   FM_A(mt_tensor_t, shape, 4), FM_A(mt_tensor_t, shape, 5),
    FM_F(mt_tensor_t, offset),     FM_F(mt_tensor_t, size),     FM_F(mt_tensor_t, scale),
    FM_F(mt_tensor_t, zero_point), FM_F(mt_tensor_t, offset),   FM_F(mt_tensor_t, size),
};
static const fm_field fm_op_fields[] = {
    FM_F(mt_op_t, opcode),         FM_F(mt_op_t, variant),      FM_F(mt_op_t, flags),
    FM_F(mt_op_t, n_inputs),       FM_F(mt_op_t, n_outputs),    FM_F(mt_op_t, first_operand),
    FM_F(mt_op_t, first_attr),     FM_F(mt_op_t, n_attrs),      FM_F(mt_op_t, scratch_region),
    FM_F(mt_op_t, scratch_offset), FM_F(mt_op_t, scratch_size), FM_F(mt_op_t, source),
};
static const fm_field fm_delegate_fields[] = {
    FM_F(mt_delegate_t, npu),
    FM_F(mt_delegate_t, flags),
    FM_F(mt_delegate_t, scratch_region),
    FM_F(mt_delegate_t, fast_scratch_region),
    FM_F(mt_delegate_t, command_offset),
    FM_F(mt_delegate_t, command_size),
    FM_F(mt_delegate_t, weights_offset),
    FM_F(mt_delegate_t, weights_size),
    FM_F(mt_delegate_t, scratch_offset),
    FM_F(mt_delegate_t, scratch_size),
    FM_F(mt_delegate_t, fast_scratch_offset),
    FM_F(mt_delegate_t, fast_scratch_size),
    FM_F(mt_delegate_t, first_binding),
    FM_F(mt_delegate_t, n_inputs),
    FM_F(mt_delegate_t, n_outputs),
    FM_F(mt_delegate_t, cpu_first_op),
    FM_F(mt_delegate_t, cpu_n_ops),
};
static const fm_field fm_binding_fields[] = {
    FM_F(mt_binding_t, tensor),   FM_F(mt_binding_t, offset),   FM_F(mt_binding_t, elem_size),
    FM_A(mt_binding_t, shape, 0), FM_A(mt_binding_t, shape, 1), FM_A(mt_binding_t, shape, 2),
    FM_A(mt_binding_t, shape, 3), FM_A(mt_binding_t, shape, 4), FM_A(mt_binding_t, shape, 5),
};
static const fm_field fm_io_fields[] = {FM_F(mt_io_t, n_inputs), FM_F(mt_io_t, n_outputs)};
static const fm_field fm_persistent_fields[] = {
    FM_F(mt_persistent_t, tensor), FM_F(mt_persistent_t, init_offset), FM_F(mt_persistent_t, flags),
    FM_F(mt_persistent_t, reserved)};

typedef struct {
  uint32_t kind, unit;
  const fm_field *fields;
  uint32_t n_fields;
} fm_record_kind;

static const fm_record_kind fm_kinds[] = {
    {MT_SECTION_TENSORS, MT_TENSOR_RECORD_SIZE, fm_tensor_fields, FM_N(fm_tensor_fields)},
    {MT_SECTION_TENSORS, MT_TENSOR_RECORD_SIZE, fm_tensor_fields, FM_N(fm_tensor_fields)},
    {MT_SECTION_OPS, MT_OP_RECORD_SIZE, fm_op_fields, FM_N(fm_op_fields)},
    {MT_SECTION_OPS, MT_OP_RECORD_SIZE, fm_op_fields, FM_N(fm_op_fields)},
    {MT_SECTION_REGIONS, MT_REGION_RECORD_SIZE, fm_region_fields, FM_N(fm_region_fields)},
    {MT_SECTION_DELEGATES, MT_DELEGATE_RECORD_SIZE, fm_delegate_fields, FM_N(fm_delegate_fields)},
    {MT_SECTION_BINDINGS, MT_BINDING_RECORD_SIZE, fm_binding_fields, FM_N(fm_binding_fields)},
    {MT_SECTION_TARGET, MT_TARGET_RECORD_SIZE, fm_target_fields, FM_N(fm_target_fields)},
    {MT_SECTION_IO, 0, fm_io_fields, FM_N(fm_io_fields)},
    {MT_SECTION_PERSISTENT, MT_PERSISTENT_RECORD_SIZE, fm_persistent_fields,
     FM_N(fm_persistent_fields)},
};

/* ---- values on the edges of the checks ---- */

/* A value some other record of the file holds: a count, an index, a size, an offset. */
static uint32_t fm_context_value(const fm_file *f, fm_rng *r)
{
  uint32_t n_tensors = fm_records(f, MT_SECTION_TENSORS, MT_TENSOR_RECORD_SIZE);
  uint32_t n_regions = fm_records(f, MT_SECTION_REGIONS, MT_REGION_RECORD_SIZE);
  const uint8_t *t = f->data + f->sec[MT_SECTION_TENSORS].offset;
  const uint8_t *g = f->data + f->sec[MT_SECTION_REGIONS].offset;
  uint32_t j;
  switch (fm_below(r, 12)) {
  case 0:
    return n_tensors;
  case 1:
    return n_tensors - 1;
  case 2:
    return fm_records(f, MT_SECTION_OPS, MT_OP_RECORD_SIZE);
  case 3:
    return fm_records(f, MT_SECTION_OPERANDS, 4);
  case 4:
    return fm_records(f, MT_SECTION_ATTRS, 4);
  case 5:
    return n_regions;
  case 6:
    return f->sec[MT_SECTION_CONST].size;
  case 7:
    return fm_records(f, MT_SECTION_BINDINGS, MT_BINDING_RECORD_SIZE);
  case 8: /* a region's size */
    if (n_regions == 0) {
      return 0;
    }
    return fm_get(g + fm_below(r, n_regions) * MT_REGION_RECORD_SIZE + offsetof(mt_region_t, size),
                  4);
  case 9: /* another tensor's offset */
    if (n_tensors == 0) {
      return 0;
    }
    j = fm_below(r, n_tensors);
    return fm_get(t + j * MT_TENSOR_RECORD_SIZE + offsetof(mt_tensor_t, offset), 4);
  case 10: /* another tensor's size */
    if (n_tensors == 0) {
      return 0;
    }
    j = fm_below(r, n_tensors);
    return fm_get(t + j * MT_TENSOR_RECORD_SIZE + offsetof(mt_tensor_t, size), 4);
  default: /* the end of another tensor */
    if (n_tensors == 0) {
      return 0;
    }
    j = fm_below(r, n_tensors);
    return fm_get(t + j * MT_TENSOR_RECORD_SIZE + offsetof(mt_tensor_t, offset), 4) +
           fm_get(t + j * MT_TENSOR_RECORD_SIZE + offsetof(mt_tensor_t, size), 4);
  }
}

/* A new value for a `width`-byte field that holds `v`. */
static uint32_t fm_value(const fm_file *f, fm_rng *r, uint32_t v, uint32_t width)
{
  static const uint32_t fixed[] = {0u,          1u,          2u,          3u,          4u,
                                   8u,          16u,         0x7Fu,       0x80u,       0xFFu,
                                   0x100u,      0x7FFFu,     0x8000u,     0xFFFFu,     0x10000u,
                                   0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0xFFFFFFFEu, 64u};
  uint32_t mask = width >= 4 ? 0xFFFFFFFFu : (1u << (8 * width)) - 1u;
  uint32_t out;
  switch (fm_below(r, 10)) {
  case 0:
  case 1:
    out = fixed[fm_below(r, FM_N(fixed))];
    break;
  case 2: /* the largest or smallest value of the width, signed or not */
    out = fm_below(r, 2) ? mask : mask >> 1;
    if (fm_below(r, 2)) {
      out = (mask >> 1) + 1u;
    }
    break;
  case 3:
    out = v + 1u;
    break;
  case 4:
    out = v - 1u;
    break;
  case 5:
    out = fm_below(r, 2) ? v * 2u : v / 2u;
    break;
  case 6:
    out = v ^ (1u << fm_below(r, 8 * width));
    break;
  case 7:
    out = fm_below(r, 2) ? v + 16u : v - 16u;
    break;
  default:
    out = fm_context_value(f, r) + fm_below(r, 3) - 1u; /* the value, or one off */
    break;
  }
  return out & mask;
}

/* An int32 attribute value: small, the edges of int8 and of shifts, int32 extremes. */
static uint32_t fm_attr_value(fm_rng *r, uint32_t v)
{
  static const int32_t fixed[] = {
      0,    1,    -1, 2,  3,       4,      5,       7,          8,         15,  16,
      31,   32,   33, 62, 63,      64,     127,     128,        255,       256, -127,
      -128, -129, -2, 30, 1 << 30, 0x7FFF, -0x8000, 0x7FFFFFFF, INT32_MIN, 100, 1000};
  switch (fm_below(r, 6)) {
  case 0:
  case 1:
  case 2:
    return (uint32_t)fixed[fm_below(r, FM_N(fixed))];
  case 3:
    return v + 1u;
  case 4:
    return v - 1u;
  default:
    return 0u - v;
  }
}

/* ---- mutations; each returns 0 when the file has nothing of that kind ---- */

static int fm_record_field(fm_file *f, fm_rng *r)
{
  const fm_record_kind *k = &fm_kinds[fm_below(r, FM_N(fm_kinds))];
  const fm_span *s = &f->sec[k->kind];
  const fm_field *fld = &k->fields[fm_below(r, k->n_fields)];
  uint8_t *p;
  uint32_t n = k->unit != 0 ? s->size / k->unit : (s->size >= MT_IO_RECORD_SIZE);
  if (n == 0) {
    return 0;
  }
  p = f->data + s->offset + fm_below(r, n) * k->unit + fld->offset;
  fm_put(p, fld->width, fm_value(f, r, fm_get(p, fld->width), fld->width));
  return 1;
}

/* An int32 of an OPERANDS / ATTRS / IO list: another tensor, an edge value, one off. */
static int fm_int_list(fm_file *f, fm_rng *r, uint32_t kind, uint32_t skip)
{
  const fm_span *s = &f->sec[kind];
  uint32_t n_tensors = fm_records(f, MT_SECTION_TENSORS, MT_TENSOR_RECORD_SIZE), n, v;
  uint8_t *p;
  if (s->size < skip + 4) {
    return 0;
  }
  n = (s->size - skip) / 4;
  p = f->data + s->offset + skip + 4 * fm_below(r, n);
  v = fm_get(p, 4);
  if (kind == MT_SECTION_ATTRS) {
    v = fm_attr_value(r, v);
  } else {
    switch (fm_below(r, 4)) {
    case 0:
    case 1:
      v = fm_below(r, n_tensors + 1);
      break;
    case 2:
      v = fm_get(f->data + s->offset + skip + 4 * fm_below(r, n), 4); /* another entry */
      break;
    default:
      v = fm_value(f, r, v, 4);
      break;
    }
  }
  fm_put(p, 4, v);
  return 1;
}

/* An attribute of a chosen op (the ATTRS entry the op's record points at). */
static int fm_op_attr(fm_file *f, fm_rng *r)
{
  const fm_span *ops = &f->sec[MT_SECTION_OPS], *attrs = &f->sec[MT_SECTION_ATTRS];
  uint32_t n_ops = ops->size / MT_OP_RECORD_SIZE, first, n, index;
  const uint8_t *op;
  uint8_t *p;
  if (n_ops == 0) {
    return 0;
  }
  op = f->data + ops->offset + fm_below(r, n_ops) * MT_OP_RECORD_SIZE;
  first = fm_get(op + offsetof(mt_op_t, first_attr), 4);
  n = fm_get(op + offsetof(mt_op_t, n_attrs), 2);
  if (n == 0) {
    return 0;
  }
  index = first + fm_below(r, n);
  if ((uint64_t)index * 4 + 4 > attrs->size) {
    return 0;
  }
  p = f->data + attrs->offset + 4 * index;
  fm_put(p, 4, fm_attr_value(r, fm_get(p, 4)));
  return 1;
}

/* CONST: an element of a constant tensor (a weight, bias, multiplier, shift, table entry) set
 * to an edge of its dtype, or a byte anywhere in the section. */
static int fm_const(fm_file *f, fm_rng *r)
{
  static const uint32_t edges[] = {0u,      1u,      0x7Fu,       0x80u,       0xFFu,       0x7FFFu,
                                   0x8000u, 0xFFFFu, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 31u,
                                   32u,     62u,     63u,         64u,         0x40000000u, 2u};
  const fm_span *c = &f->sec[MT_SECTION_CONST], *ts = &f->sec[MT_SECTION_TENSORS];
  uint32_t n_tensors = ts->size / MT_TENSOR_RECORD_SIZE, tries;
  if (c->size == 0) {
    return 0;
  }
  for (tries = 0; tries < 8 && n_tensors != 0 && fm_below(r, 4) != 0; tries++) {
    const uint8_t *t = f->data + ts->offset + fm_below(r, n_tensors) * MT_TENSOR_RECORD_SIZE;
    uint32_t dtype = t[offsetof(mt_tensor_t, dtype)];
    uint32_t off = fm_get(t + offsetof(mt_tensor_t, offset), 4);
    uint32_t size = fm_get(t + offsetof(mt_tensor_t, size), 4);
    uint32_t width = dtype == MT_DTYPE_INT32 ? 4 : dtype == MT_DTYPE_INT16 ? 2 : 1;
    uint32_t at;
    if (t[offsetof(mt_tensor_t, storage)] != MT_STORAGE_CONST || size < width ||
        (uint64_t)off + size > c->size) {
      continue;
    }
    at = off + width * fm_below(r, size / width);
    fm_put(f->data + c->offset + at, width, edges[fm_below(r, FM_N(edges))]);
    return 1;
  }
  f->data[c->offset + fm_below(r, c->size)] = (uint8_t)fm_next(r);
  return 1;
}

static int fm_section_entry(fm_file *f, fm_rng *r)
{
  const fm_field *fld = &fm_section_fields[fm_below(r, FM_N(fm_section_fields))];
  uint8_t *p;
  uint32_t v;
  if (f->count == 0) {
    return 0;
  }
  p = f->data + f->table + fm_below(r, f->count) * MT_SECTION_RECORD_SIZE + fld->offset;
  v = fm_get(p, fld->width);
  if (fld->offset == offsetof(mt_section_t, size) && fm_below(r, 2)) {
    static const uint32_t units[] = {4,
                                     16,
                                     MT_TENSOR_RECORD_SIZE,
                                     MT_OP_RECORD_SIZE,
                                     MT_DELEGATE_RECORD_SIZE,
                                     MT_BINDING_RECORD_SIZE};
    uint32_t unit = units[fm_below(r, FM_N(units))];
    v = fm_below(r, 2) ? v + unit : v - unit; /* a record more or less */
  } else {
    v = fm_value(f, r, v, fld->width);
  }
  fm_put(p, fld->width, v);
  return 1;
}

static int fm_header(fm_file *f, fm_rng *r)
{
  const fm_field *fld = &fm_header_fields[fm_below(r, FM_N(fm_header_fields))];
  uint8_t *p = f->data + fld->offset;
  if (f->size < MT_HEADER_RECORD_SIZE) {
    return 0;
  }
  fm_put(p, fld->width, fm_value(f, r, fm_get(p, fld->width), fld->width));
  return 1;
}

/* Copy one whole record over another of the same section (or swap two int32 list entries). */
static int fm_copy_record(fm_file *f, fm_rng *r)
{
  static const uint32_t kinds[] = {MT_SECTION_TENSORS,   MT_SECTION_OPS,      MT_SECTION_REGIONS,
                                   MT_SECTION_DELEGATES, MT_SECTION_BINDINGS, MT_SECTION_OPERANDS,
                                   MT_SECTION_ATTRS};
  static const uint32_t units[] = {MT_TENSOR_RECORD_SIZE,
                                   MT_OP_RECORD_SIZE,
                                   MT_REGION_RECORD_SIZE,
                                   MT_DELEGATE_RECORD_SIZE,
                                   MT_BINDING_RECORD_SIZE,
                                   4,
                                   4};
  uint32_t k = fm_below(r, FM_N(kinds)), unit = units[k], n, a, b;
  uint8_t tmp[MT_DELEGATE_RECORD_SIZE];
  const fm_span *s = &f->sec[kinds[k]];
  n = s->size / unit;
  if (n < 2) {
    return 0;
  }
  a = fm_below(r, n);
  b = fm_below(r, n);
  memcpy(tmp, f->data + s->offset + a * unit, unit);
  if (fm_below(r, 2)) { /* swap */
    memmove(f->data + s->offset + a * unit, f->data + s->offset + b * unit, unit);
  }
  memcpy(f->data + s->offset + b * unit, tmp, unit);
  return 1;
}

/* libFuzzer's own byte mutations, confined to one section (its size stays). */
static int fm_bytes(fm_file *f, fm_rng *r)
{
  uint8_t tmp[256];
  const fm_span *s = &f->sec[1 + fm_below(r, MT_SECTION_CONST)];
  uint32_t n, at, got;
  if (s->size == 0) {
    return 0;
  }
  n = s->size < sizeof tmp ? s->size : (uint32_t)sizeof tmp;
  at = s->offset + fm_below(r, s->size - n + 1);
  memcpy(tmp, f->data + at, n);
  got = (uint32_t)LLVMFuzzerMutate(tmp, n, n);
  (void)got;
  memcpy(f->data + at, tmp, n);
  return 1;
}

static int fm_mutate_once(fm_file *f, fm_rng *r)
{
  uint32_t pick = fm_below(r, 100);
  if (pick < 40) {
    return fm_record_field(f, r);
  }
  if (pick < 55) {
    return fm_op_attr(f, r);
  }
  if (pick < 60) {
    return fm_int_list(f, r, MT_SECTION_ATTRS, 0);
  }
  if (pick < 68) {
    return fm_int_list(f, r, MT_SECTION_OPERANDS, 0);
  }
  if (pick < 71) {
    return fm_int_list(f, r, MT_SECTION_IO, MT_IO_RECORD_SIZE);
  }
  if (pick < 80) {
    return fm_const(f, r);
  }
  if (pick < 85) {
    return fm_section_entry(f, r);
  }
  if (pick < 86) {
    return fm_header(f, r);
  }
  if (pick < 93) {
    return fm_copy_record(f, r);
  }
  return fm_bytes(f, r);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
  fm_rng r;
  fm_file f;
  uint32_t n, done = 0, tries;
  (void)max_size;
  r.s = seed * 2654435761u + 1u;
  if (!fm_parse(&f, data, size)) {
    if (size >= MT_HEADER_RECORD_SIZE && fm_below(&r, 2)) {
      fm_header(&f, &r);
    } else {
      size = LLVMFuzzerMutate(data, size, max_size);
    }
    fm_seal(data, size);
    return size;
  }
  n = 1 + (fm_below(&r, 4) == 0) + (fm_below(&r, 8) == 0) + (fm_below(&r, 16) == 0);
  for (tries = 0; done < n && tries < 4 * n; tries++) {
    done += (uint32_t)fm_mutate_once(&f, &r);
    if (done < n) {
      fm_parse(&f, data, size); /* a section table entry may have moved */
    }
  }
  fm_seal(data, size);
  return size;
}

/* Crossover: a record of the second file over a record of the same section of the first. */
size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2,
                                 size_t size2, uint8_t *out, size_t max_out_size, unsigned int seed)
{
  static const uint32_t kinds[] = {MT_SECTION_TENSORS, MT_SECTION_OPS, MT_SECTION_REGIONS,
                                   MT_SECTION_DELEGATES, MT_SECTION_BINDINGS};
  static const uint32_t units[] = {MT_TENSOR_RECORD_SIZE, MT_OP_RECORD_SIZE, MT_REGION_RECORD_SIZE,
                                   MT_DELEGATE_RECORD_SIZE, MT_BINDING_RECORD_SIZE};
  fm_file a, b;
  fm_rng r;
  uint32_t k, n_a, n_b;
  if (size1 > max_out_size) {
    return 0;
  }
  memcpy(out, data1, size1);
  r.s = seed * 2246822519u + 7u;
  if (fm_parse(&a, out, size1) && fm_parse(&b, (uint8_t *)(uintptr_t)data2, size2)) {
    k = fm_below(&r, FM_N(kinds));
    n_a = a.sec[kinds[k]].size / units[k];
    n_b = b.sec[kinds[k]].size / units[k];
    if (n_a != 0 && n_b != 0) {
      memcpy(out + a.sec[kinds[k]].offset + fm_below(&r, n_a) * units[k],
             data2 + b.sec[kinds[k]].offset + fm_below(&r, n_b) * units[k], units[k]);
    }
  }
  fm_seal(out, size1);
  return size1;
}
