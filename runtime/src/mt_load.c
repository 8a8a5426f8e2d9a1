/* mt_load.c - mt_load, first half: the raw format checks of src/mcutorch/program/reader.py.
 *
 * The order of the checks is the Python reader's, step for step, so that any corrupt file gets
 * the same MT_ERR_* from both (tests/py/test_crt.py compares them on thousands of mutated
 * files): header -> section table -> op records -> IO -> target -> regions -> tensors ->
 * delegates -> (metadata: skipped here) -> the semantic checks of mt_validate.c.
 * Sums of two u32 fields are done in 64 bits: the Python reader never overflows either. */
#include <string.h>

#include "mt_internal.h"

#define MT_KINDS          (MT_SECTION_PERSISTENT + 1)
#define MT_KIND_BIT(kind) (1u << (kind))
#define MT_REQUIRED_KINDS (((MT_KIND_BIT(MT_SECTION_METADATA) - 1u) & ~1u)) /* kinds 1..10 */

typedef char mt_check_dtypes[(MT_DTYPE_COUNT == 5) ? 1 : -1]; /* mt_dtype_bytes's table */

const mt_op_counts mt_op_table[MT_OP_COUNT] = {
#define MT_OP_ROW(name, code, n_in, n_out, n_attrs, n_variants, alias, mac, dtypes, act)           \
  [code] = {n_in, n_out, n_attrs, n_variants, alias, mac, dtypes, act},
    MT_OP_LIST(MT_OP_ROW)
#undef MT_OP_ROW
};

/* Record size of each known section kind (byte sections: 1; int32 arrays: 4); 0 = unknown. */
static const uint8_t mt_section_unit[MT_KINDS] = {
    [MT_SECTION_TARGET] = MT_TARGET_RECORD_SIZE,
    [MT_SECTION_REGIONS] = MT_REGION_RECORD_SIZE,
    [MT_SECTION_TENSORS] = MT_TENSOR_RECORD_SIZE,
    [MT_SECTION_OPS] = MT_OP_RECORD_SIZE,
    [MT_SECTION_OPERANDS] = 4,
    [MT_SECTION_ATTRS] = 4,
    [MT_SECTION_IO] = 1,
    [MT_SECTION_DELEGATES] = MT_DELEGATE_RECORD_SIZE,
    [MT_SECTION_BINDINGS] = MT_BINDING_RECORD_SIZE,
    [MT_SECTION_CONST] = 1,
    [MT_SECTION_METADATA] = 1,
    [MT_SECTION_PERSISTENT] = MT_PERSISTENT_RECORD_SIZE,
};

typedef struct {
  uint32_t offset[MT_KINDS];
  uint32_t size[MT_KINDS];
  uint32_t found; /* MT_KIND_BIT of every kind seen */
} mt_sections;

uint32_t mt_dtype_bytes(uint32_t dtype)
{
  static const uint8_t size[MT_DTYPE_COUNT] = {MT_DTYPE_SIZE_INT8, MT_DTYPE_SIZE_UINT8,
                                               MT_DTYPE_SIZE_INT16, MT_DTYPE_SIZE_INT32,
                                               MT_DTYPE_SIZE_INT64};
  return size[dtype];
}

uint64_t mt_shape_numel(const uint32_t *dims, uint32_t n)
{
  uint64_t p = 1;
  uint32_t k;
  for (k = 0; k < n; k++) {
    if (dims[k] == 0) {
      return 0;
    }
  }
  for (k = 0; k < n; k++) {
    p *= dims[k];
    if (p > UINT32_MAX) {
      return (uint64_t)UINT32_MAX + 1u;
    }
  }
  return p;
}

static mt_status mt_check_header(const uint8_t *p, size_t size)
{
  const mt_header_t *h = (const mt_header_t *)(const void *)p;
  MT_REQUIRE(size >= MT_HEADER_RECORD_SIZE, MT_ERR_TRUNCATED);
  MT_REQUIRE(memcmp(h->magic, MT_PROGRAM_MAGIC, 4) == 0, MT_ERR_BAD_MAGIC);
  MT_REQUIRE(h->version_major == MT_FORMAT_VERSION_MAJOR, MT_ERR_BAD_VERSION);
  MT_REQUIRE((uint64_t)h->file_size == (uint64_t)size, MT_ERR_TRUNCATED);
#ifndef MT_SKIP_CRC
  MT_REQUIRE(mt_crc32(0, p + MT_CRC_START, size - MT_CRC_START) == h->crc32, MT_ERR_BAD_CRC);
#endif
  MT_REQUIRE(h->flags == 0 && h->reserved == 0, MT_ERR_BAD_HEADER);
  return MT_STATUS_OK;
}

static mt_status mt_check_entry(const mt_section_t *e, uint32_t file_size)
{
  MT_REQUIRE(e->reserved == 0 && (e->flags & ~MT_SECTION_FLAG_SKIPPABLE) == 0, MT_ERR_BAD_SECTION);
  MT_REQUIRE(e->offset % MT_ALIGN == 0, MT_ERR_BAD_SECTION);
  MT_REQUIRE((uint64_t)e->offset + e->size <= file_size, MT_ERR_BAD_SECTION);
  return MT_STATUS_OK;
}

static mt_status mt_check_known(const mt_section_t *e, const mt_sections *s)
{
  uint32_t expected = e->kind == MT_SECTION_METADATA ? MT_SECTION_FLAG_SKIPPABLE : 0;
  MT_REQUIRE((s->found & MT_KIND_BIT(e->kind)) == 0, MT_ERR_BAD_SECTION);
  MT_REQUIRE(e->flags == expected, MT_ERR_BAD_SECTION);
  MT_REQUIRE(e->size % mt_section_unit[e->kind] == 0, MT_ERR_BAD_SECTION);
  MT_REQUIRE(e->kind != MT_SECTION_TARGET || e->size == MT_TARGET_RECORD_SIZE, MT_ERR_BAD_SECTION);
  return MT_STATUS_OK;
}

/* Byte span k of the file: 0 = header, 1 = section table, 2.. = section k - 2. */
static void mt_span(const uint8_t *p, uint32_t k, uint64_t *start, uint64_t *end)
{
  const mt_header_t *h = (const mt_header_t *)(const void *)p;
  const mt_section_t *e = (const mt_section_t *)(const void *)(p + h->section_table);
  if (k == 0) {
    *start = 0;
    *end = MT_HEADER_RECORD_SIZE;
  } else if (k == 1) {
    *start = h->section_table;
    *end = *start + (uint64_t)h->section_count * MT_SECTION_RECORD_SIZE;
  } else {
    *start = e[k - 2].offset;
    *end = *start + e[k - 2].size;
  }
}

/* Python sorts the spans and compares neighbours; equivalently, every pair is checked with
 * the one that sorts first as `a`: the pair overlaps when b starts before a ends. */
static mt_status mt_check_overlap(const uint8_t *p, uint32_t n_spans)
{
  uint32_t i, j;
  for (i = 0; i < n_spans; i++) {
    for (j = i + 1; j < n_spans; j++) {
      uint64_t a0, a1, b0, b1, t0, t1;
      mt_span(p, i, &a0, &a1);
      mt_span(p, j, &b0, &b1);
      if (b0 < a0 || (b0 == a0 && b1 < a1)) {
        t0 = a0, t1 = a1, a0 = b0, a1 = b1, b0 = t0, b1 = t1;
      }
      MT_REQUIRE(b0 >= a1, MT_ERR_BAD_SECTION);
    }
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_sections(const uint8_t *p, uint32_t size, mt_sections *s)
{
  const mt_header_t *h = (const mt_header_t *)(const void *)p;
  const mt_section_t *e;
  uint32_t n = h->section_count, table = h->section_table, i;
  MT_REQUIRE(n <= MT_MAX_SECTIONS, MT_ERR_BAD_SECTION);
  MT_REQUIRE(table % MT_ALIGN == 0 && table >= MT_HEADER_RECORD_SIZE &&
                 (uint64_t)table + (uint64_t)n * MT_SECTION_RECORD_SIZE <= size,
             MT_ERR_BAD_SECTION);
  e = (const mt_section_t *)(const void *)(p + table);
  for (i = 0; i < n; i++) {
    MT_TRY(mt_check_entry(&e[i], size));
    if (e[i].kind >= MT_KINDS || mt_section_unit[e[i].kind] == 0) {
      MT_REQUIRE(e[i].flags & MT_SECTION_FLAG_SKIPPABLE, MT_ERR_BAD_SECTION);
      continue;
    }
    MT_TRY(mt_check_known(&e[i], s));
    s->found |= MT_KIND_BIT(e[i].kind);
    s->offset[e[i].kind] = e[i].offset;
    s->size[e[i].kind] = e[i].size;
  }
  MT_TRY(mt_check_overlap(p, n + 2));
  MT_REQUIRE((s->found & MT_REQUIRED_KINDS) == MT_REQUIRED_KINDS, MT_ERR_BAD_SECTION);
  return MT_STATUS_OK;
}

/* Point the model at each section (every record naturally aligned: the buffer is 16-aligned). */
static void mt_locate(mt_model *m, const uint8_t *p, const mt_sections *s)
{
#define MT_AT(kind) ((const void *)(p + s->offset[kind]))
  m->program = p;
  m->target = MT_AT(MT_SECTION_TARGET);
  m->regions = MT_AT(MT_SECTION_REGIONS);
  m->n_regions = s->size[MT_SECTION_REGIONS] / MT_REGION_RECORD_SIZE;
  m->tensors = MT_AT(MT_SECTION_TENSORS);
  m->n_tensors = s->size[MT_SECTION_TENSORS] / MT_TENSOR_RECORD_SIZE;
  m->ops = MT_AT(MT_SECTION_OPS);
  m->n_ops = s->size[MT_SECTION_OPS] / MT_OP_RECORD_SIZE;
  m->operands = MT_AT(MT_SECTION_OPERANDS);
  m->n_operands = s->size[MT_SECTION_OPERANDS] / 4;
  m->attrs = MT_AT(MT_SECTION_ATTRS);
  m->n_attrs = s->size[MT_SECTION_ATTRS] / 4;
  m->delegates = MT_AT(MT_SECTION_DELEGATES);
  m->n_delegates = s->size[MT_SECTION_DELEGATES] / MT_DELEGATE_RECORD_SIZE;
  m->bindings = MT_AT(MT_SECTION_BINDINGS);
  m->n_bindings = s->size[MT_SECTION_BINDINGS] / MT_BINDING_RECORD_SIZE;
  m->constants = MT_AT(MT_SECTION_CONST);
  m->const_size = s->size[MT_SECTION_CONST];
  m->persistent = MT_AT(MT_SECTION_PERSISTENT); /* optional: offset 0, size 0 when absent */
  m->n_persistent = s->size[MT_SECTION_PERSISTENT] / MT_PERSISTENT_RECORD_SIZE;
#undef MT_AT
}

/* An absent area (region NONE16) must have offset and size 0. */
static mt_status mt_check_absent(uint32_t region, uint32_t offset, uint32_t size, int err)
{
  MT_REQUIRE(region != MT_NONE16 || (offset == 0 && size == 0), err);
  return MT_STATUS_OK;
}

static mt_status mt_check_op_records(const mt_model *m)
{
  uint32_t i;
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    MT_REQUIRE(op->opcode < MT_OP_COUNT, MT_ERR_BAD_OP);
    MT_REQUIRE(op->variant < mt_op_table[op->opcode].n_variants, MT_ERR_BAD_OP);
    MT_REQUIRE((op->flags & ~(MT_OP_FLAG_SUBGRAPH | MT_OP_FLAG_RING)) == 0, MT_ERR_BAD_OP);
    MT_REQUIRE(op->n_attrs == mt_op_table[op->opcode].n_attrs, MT_ERR_BAD_OP);
    MT_REQUIRE(op->n_inputs <= MT_MAX_VARIADIC && op->n_outputs <= MT_MAX_VARIADIC, MT_ERR_BAD_OP);
    MT_REQUIRE((uint64_t)op->first_operand + op->n_inputs + op->n_outputs <= m->n_operands,
               MT_ERR_BAD_OFFSET);
    MT_REQUIRE((uint64_t)op->first_attr + op->n_attrs <= m->n_attrs, MT_ERR_BAD_OFFSET);
    MT_TRY(
        mt_check_absent(op->scratch_region, op->scratch_offset, op->scratch_size, MT_ERR_BAD_OP));
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_io_section(mt_model *m, const uint8_t *io, uint32_t size)
{
  const mt_io_t *h = (const mt_io_t *)(const void *)io;
  MT_REQUIRE(size >= MT_IO_RECORD_SIZE, MT_ERR_BAD_IO);
  MT_REQUIRE(size == MT_IO_RECORD_SIZE + 4 * ((uint64_t)h->n_inputs + h->n_outputs), MT_ERR_BAD_IO);
  m->n_inputs = h->n_inputs;
  m->n_outputs = h->n_outputs;
  m->io = (const int32_t *)(const void *)(io + MT_IO_RECORD_SIZE);
  return MT_STATUS_OK;
}

static mt_status mt_check_target_record(const mt_target_t *t)
{
  MT_REQUIRE(t->reserved2 == 0 && (t->switches & ~MT_TARGET_SWITCHES_KNOWN) == 0,
             MT_ERR_BAD_TARGET);
  MT_REQUIRE(t->cpu < MT_CPU_COUNT && t->isa < MT_ISA_COUNT, MT_ERR_BAD_TARGET);
  MT_REQUIRE(t->npu < MT_NPU_COUNT && t->rounding < MT_ROUNDING_COUNT, MT_ERR_BAD_TARGET);
  return MT_STATUS_OK;
}

/* A name field: text, then only zero bytes (no NUL inside the text). */
static int mt_zero_padded(const char *name, uint32_t n)
{
  uint32_t k = 0;
  while (k < n && name[k] != 0) {
    k++;
  }
  while (k < n && name[k] == 0) {
    k++;
  }
  return k == n;
}

static mt_status mt_check_region_records(const mt_model *m)
{
  const uint32_t known = MT_REGION_FLAG_NPU | MT_REGION_FLAG_BASE_KNOWN;
  uint32_t i;
  MT_REQUIRE(m->n_regions <= MT_MAX_REGIONS, MT_ERR_BAD_REGION);
  for (i = 0; i < m->n_regions; i++) {
    const mt_region_t *r = &m->regions[i];
    MT_REQUIRE(mt_zero_padded(r->name, sizeof r->name), MT_ERR_BAD_REGION);
    MT_REQUIRE((r->flags & ~known) == 0 && r->reserved == 0, MT_ERR_BAD_REGION);
    MT_REQUIRE((r->flags & MT_REGION_FLAG_BASE_KNOWN) || r->base == 0, MT_ERR_BAD_REGION);
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_tensor_records(const mt_model *m)
{
  uint32_t i, k;
  for (i = 0; i < m->n_tensors; i++) {
    const mt_tensor_t *t = &m->tensors[i];
    MT_REQUIRE(t->dtype < MT_DTYPE_COUNT && t->storage < MT_STORAGE_COUNT, MT_ERR_BAD_TENSOR);
    MT_REQUIRE(t->rank <= MT_MAX_RANK, MT_ERR_BAD_TENSOR);
    for (k = t->rank; k < MT_MAX_RANK; k++) {
      MT_REQUIRE(t->shape[k] == 0, MT_ERR_BAD_TENSOR);
    }
    MT_REQUIRE((t->flags & ~MT_TENSOR_FLAG_RING) == 0 && t->reserved == 0, MT_ERR_BAD_TENSOR);
    MT_REQUIRE(mt_shape_numel(t->shape, t->rank) * mt_dtype_bytes(t->dtype) == t->size,
               MT_ERR_BAD_TENSOR);
    MT_REQUIRE((t->storage != MT_STORAGE_ARENA) == (t->region == MT_NONE16), MT_ERR_BAD_TENSOR);
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_delegate_records(const mt_model *m)
{
  uint32_t k;
  MT_REQUIRE(m->n_delegates <= MT_MAX_DELEGATES, MT_ERR_BAD_DELEGATE);
  for (k = 0; k < m->n_delegates; k++) {
    const mt_delegate_t *d = &m->delegates[k];
    MT_REQUIRE(d->npu < MT_NPU_COUNT && d->flags == 0, MT_ERR_BAD_DELEGATE);
    MT_REQUIRE(d->n_inputs >= 1 && d->n_inputs <= MT_MAX_VARIADIC && d->n_outputs >= 1 &&
                   d->n_outputs <= MT_MAX_VARIADIC,
               MT_ERR_BAD_DELEGATE);
    MT_REQUIRE((uint64_t)d->first_binding + d->n_inputs + d->n_outputs <= m->n_bindings,
               MT_ERR_BAD_OFFSET);
    MT_REQUIRE(d->cpu_first_op != MT_NONE32 || d->cpu_n_ops == 0, MT_ERR_BAD_DELEGATE);
    MT_TRY(mt_check_absent(d->scratch_region, d->scratch_offset, d->scratch_size,
                           MT_ERR_BAD_DELEGATE));
    MT_TRY(mt_check_absent(d->fast_scratch_region, d->fast_scratch_offset, d->fast_scratch_size,
                           MT_ERR_BAD_DELEGATE));
  }
  return MT_STATUS_OK;
}

static mt_status mt_check_persistent_records(const mt_model *m)
{
  uint32_t k;
  for (k = 0; k < m->n_persistent; k++) {
    MT_REQUIRE(m->persistent[k].flags == 0 && m->persistent[k].reserved == 0,
               MT_ERR_BAD_PERSISTENT);
  }
  return MT_STATUS_OK;
}

/* Every (opcode, variant) of a non-delegate op needs a kernel (delegate ops are run by the
 * interpreter itself; the ops of their CPU versions need kernels too). */
static mt_status mt_check_kernels(mt_model *m, const mt_kernel_table *kt)
{
  const uint32_t n_variants = sizeof kt->rows[0].variants / sizeof kt->rows[0].variants[0];
  uint32_t i;
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    if (kt == NULL || op->opcode == MT_OP_DELEGATE) {
      continue;
    }
    MT_REQUIRE(kt->rows != NULL && op->opcode < kt->n_rows && op->variant < n_variants &&
                   kt->rows[op->opcode].variants[op->variant] != NULL,
               MT_STATUS_NO_KERNEL);
  }
  m->kernels = kt;
  return MT_STATUS_OK;
}

mt_status mt_load(mt_model *m, const void *program, size_t size, const mt_kernel_table *kernels)
{
  const uint8_t *p = (const uint8_t *)program;
  mt_sections s;
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  memset(m, 0, sizeof *m);
  memset(&s, 0, sizeof s);
  MT_REQUIRE(p != NULL && (uintptr_t)p % MT_ALIGN == 0, MT_STATUS_BAD_ARGUMENT);
  MT_TRY(mt_check_header(p, size));
  MT_TRY(mt_check_sections(p, (uint32_t)size, &s));
  mt_locate(m, p, &s);
  MT_TRY(mt_check_op_records(m));
  MT_TRY(mt_check_io_section(m, p + s.offset[MT_SECTION_IO], s.size[MT_SECTION_IO]));
  MT_TRY(mt_check_target_record(m->target));
  MT_TRY(mt_check_region_records(m));
  MT_TRY(mt_check_tensor_records(m));
  MT_TRY(mt_check_delegate_records(m));
  MT_TRY(mt_check_persistent_records(m));
  MT_TRY(mt_validate_program(m));
  MT_TRY(mt_check_kernels(m, kernels));
  m->stage = MT_STAGE_LOADED;
  return MT_STATUS_OK;
}
