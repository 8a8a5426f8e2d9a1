/* test_loader.c - C unit tests of the runtime core: hand-made programs, the API order, the
 * interpreter, delegates (NPU hook present / absent / failing, CPU version), profiling hooks.
 *
 * Programs are assembled here from the generated record structs (mt_program.h), so the tests
 * need no Python. Built by tests/py/test_crt.py with gcc -fsanitize=address,undefined
 * -DMT_PROFILE together with the runtime core; prints "ok <n> checks" and exits 0, or names
 * the first failed check and exits 1. */
#include <stdio.h>
#include <string.h>

#include "mcutorch.h"
#include "mt_port.h"

#include "check.h"

/* mt_status (mt_kernel.h) and the MT_ERR_* enum (mt_program.h) are distinct C enum types:
 * compare load errors as ints. */
#define CHECK_IS(status, expected) CHECK((int)(status) == (int)(expected))

/* ---- a program under construction ---- */
typedef struct {
  mt_target_t target;
  mt_region_t regions[2];
  mt_tensor_t tensors[4];
  mt_op_t ops[2];
  int32_t operands[4], attrs[2], io[2];
  mt_delegate_t delegates[1];
  mt_binding_t bindings[2];
  uint8_t constants[32];
  uint32_t n_regions, n_tensors, n_ops, n_operands, n_attrs, n_delegates, n_bindings;
} spec;

typedef struct {
  uint32_t kind;
  const void *data;
  uint32_t size;
} part;

static uint8_t g_file[4096] __attribute__((aligned(16)));

/* Header, section table, then each section 16-aligned: what writer.py does. */
static uint32_t assemble(const spec *s)
{
  uint32_t io_head[2] = {1, 1}, pos, k, n = 10;
  uint8_t io[16];
  part parts[10] = {
      {MT_SECTION_TARGET, &s->target, sizeof s->target},
      {MT_SECTION_REGIONS, s->regions, s->n_regions * MT_REGION_RECORD_SIZE},
      {MT_SECTION_TENSORS, s->tensors, s->n_tensors * MT_TENSOR_RECORD_SIZE},
      {MT_SECTION_OPS, s->ops, s->n_ops * MT_OP_RECORD_SIZE},
      {MT_SECTION_OPERANDS, s->operands, s->n_operands * 4},
      {MT_SECTION_ATTRS, s->attrs, s->n_attrs * 4},
      {MT_SECTION_IO, io, sizeof io},
      {MT_SECTION_DELEGATES, s->delegates, s->n_delegates * MT_DELEGATE_RECORD_SIZE},
      {MT_SECTION_BINDINGS, s->bindings, s->n_bindings * MT_BINDING_RECORD_SIZE},
      {MT_SECTION_CONST, s->constants, sizeof s->constants},
  };
  mt_header_t h;
  memcpy(io, io_head, 8);
  memcpy(io + 8, s->io, 8);
  memset(g_file, 0, sizeof g_file);
  pos = MT_HEADER_RECORD_SIZE + n * MT_SECTION_RECORD_SIZE;
  for (k = 0; k < n; k++) {
    mt_section_t e = {(uint16_t)parts[k].kind, 0, 0, parts[k].size, 0};
    pos += (MT_ALIGN - pos % MT_ALIGN) % MT_ALIGN;
    e.offset = pos;
    memcpy(g_file + MT_HEADER_RECORD_SIZE + k * MT_SECTION_RECORD_SIZE, &e, sizeof e);
    memcpy(g_file + pos, parts[k].data, parts[k].size);
    pos += parts[k].size;
  }
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MT_PROGRAM_MAGIC, 4);
  h.version_major = MT_FORMAT_VERSION_MAJOR;
  h.version_minor = MT_FORMAT_VERSION_MINOR;
  h.file_size = pos;
  h.section_count = n;
  h.section_table = MT_HEADER_RECORD_SIZE;
  memcpy(g_file, &h, sizeof h);
  h.crc32 = mt_crc32(0, g_file + MT_CRC_START, pos - MT_CRC_START);
  memcpy(g_file, &h, sizeof h);
  return pos;
}

static void set_tensor(mt_tensor_t *t, uint16_t region, uint32_t offset)
{
  memset(t, 0, sizeof *t);
  t->dtype = MT_DTYPE_INT8;
  t->rank = 2;
  t->region = region;
  t->shape[0] = 1;
  t->shape[1] = 4;
  t->offset = offset;
  t->size = 4;
  t->scale = 0.5f;
}

static void set_op(mt_op_t *op, uint16_t opcode, uint32_t first_operand, uint32_t first_attr,
                   uint16_t n_attrs)
{
  memset(op, 0, sizeof *op);
  op->opcode = opcode;
  op->n_inputs = 1;
  op->n_outputs = 1;
  op->first_operand = first_operand;
  op->first_attr = first_attr;
  op->n_attrs = n_attrs;
  op->scratch_region = MT_NONE16;
  op->source = MT_NONE32;
}

/* y = copy(x): one region "ram" of 32 bytes, x at 0, y at 16. */
static void copy_program(spec *s)
{
  memset(s, 0, sizeof *s);
  s->target.cpu = MT_CPU_CORTEX_M55;
  s->target.isa = MT_ISA_MVE;
  memcpy(s->regions[0].name, "ram", 3);
  s->regions[0].size = 32;
  s->regions[0].alignment = 16;
  s->n_regions = 1;
  set_tensor(&s->tensors[0], 0, 0);
  set_tensor(&s->tensors[1], 0, 16);
  s->n_tensors = 2;
  set_op(&s->ops[0], MT_OP_COPY, 0, 0, 0);
  s->n_ops = 1;
  s->operands[0] = 0;
  s->operands[1] = 1;
  s->n_operands = 2;
  s->io[0] = 0;
  s->io[1] = 1;
}

/* y = delegate(x) with CPU version copy(x) (op 1): x and y live in Vela's scratch area. */
static void delegate_program(spec *s, int with_cpu_version)
{
  copy_program(s);
  s->target.npu = MT_NPU_ETHOS_U55_128;
  s->regions[0].flags = MT_REGION_FLAG_NPU;
  set_op(&s->ops[0], MT_OP_DELEGATE, 0, 0, MT_DELEGATE_N_ATTRS);
  s->attrs[0] = 0;
  s->n_attrs = 1;
  set_op(&s->ops[1], MT_OP_COPY, 2, 1, 0);
  s->ops[1].flags = MT_OP_FLAG_SUBGRAPH;
  s->n_ops = with_cpu_version ? 2 : 1;
  s->operands[2] = 0;
  s->operands[3] = 1;
  s->n_operands = 4;
  s->delegates[0].npu = MT_NPU_ETHOS_U55_128;
  s->delegates[0].fast_scratch_region = MT_NONE16;
  s->delegates[0].command_size = 16;
  s->delegates[0].scratch_size = 32;
  s->delegates[0].n_inputs = 1;
  s->delegates[0].n_outputs = 1;
  s->delegates[0].cpu_first_op = with_cpu_version ? 1 : MT_NONE32;
  s->delegates[0].cpu_n_ops = with_cpu_version ? 1 : 0;
  s->n_delegates = 1;
  s->bindings[0].tensor = 0;
  s->bindings[1].tensor = 1;
  s->bindings[1].offset = 16;
  s->bindings[0].elem_size = s->bindings[1].elem_size = 1;
  s->bindings[0].shape[4] = s->bindings[1].shape[4] = 1;
  s->bindings[0].shape[5] = s->bindings[1].shape[5] = 4;
  s->bindings[0].shape[0] = s->bindings[1].shape[0] = 1;
  s->bindings[0].shape[1] = s->bindings[1].shape[1] = 1;
  s->bindings[0].shape[2] = s->bindings[1].shape[2] = 1;
  s->bindings[0].shape[3] = s->bindings[1].shape[3] = 1;
  s->n_bindings = 2;
  memset(s->constants, 0xC5, 16);
}

/* ---- a test kernel table (copy only) and hooks that record what they saw ---- */
static int g_copies, g_npu_calls, g_begins, g_ends;
static mt_status g_npu_answer = MT_STATUS_NO_NPU;
static mt_delegate_call g_last_call;

static mt_status test_copy(const mt_op_args *a)
{
  g_copies++;
  if (a->n_in != 1 || a->n_out != 1 || a->in[0].rec->size != a->out[0].rec->size) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  memcpy(a->out[0].data, a->in[0].data, a->in[0].rec->size);
  return MT_STATUS_OK;
}

static const mt_kernel_row g_rows[MT_OP_COUNT] = {[MT_OP_COPY] = {{test_copy, NULL, NULL, NULL}}};
static const mt_kernel_table g_kernels = {g_rows, MT_OP_COUNT};
static const mt_kernel_table g_no_kernels = {g_rows, MT_OP_COPY}; /* rows end before copy */

mt_status mt_ethosu_invoke(const mt_delegate_call *call)
{
  g_npu_calls++;
  g_last_call = *call;
  if (g_npu_answer == MT_STATUS_OK) {
    memset(call->outputs[0].data, 0x77, call->outputs[0].rec->size);
  }
  return g_npu_answer;
}

void mt_port_op_begin(uint32_t op)
{
  (void)op;
  g_begins++;
}

void mt_port_op_end(uint32_t op)
{
  (void)op;
  g_ends++;
}

/* ---- the tests ---- */
static void *g_state[64];
static uint8_t g_arena[64] __attribute__((aligned(16)));

/* Load, bind everything and set x = {1, 2, 3, 4}; returns the load status. */
static mt_status ready(mt_model *m, uint32_t size, const mt_kernel_table *kt)
{
  static const int8_t x[4] = {1, 2, 3, 4};
  mt_status st = mt_load(m, g_file, size, kt);
  if (st != MT_STATUS_OK) {
    return st;
  }
  CHECK(mt_state_size(m) <= sizeof g_state);
  CHECK(mt_bind_state(m, g_state, sizeof g_state) == MT_STATUS_OK);
  CHECK(mt_bind_arena(m, 0, g_arena, sizeof g_arena) == MT_STATUS_OK);
  memset(g_arena, 0, sizeof g_arena);
  memcpy(mt_input(m, 0)->data, x, 4);
  return st;
}

static void test_copy_program(void)
{
  spec s;
  mt_model m;
  uint32_t size;
  const mt_tensor *y;
  copy_program(&s);
  size = assemble(&s);
  CHECK(ready(&m, size, &g_kernels) == MT_STATUS_OK);
  CHECK(mt_region_count(&m) == 1 && mt_arena_size(&m, 0) == 32 && mt_arena_size(&m, 1) == 0);
  CHECK(mt_input_count(&m) == 1 && mt_output_count(&m) == 1 && mt_input(&m, 1) == NULL);
  /* arena pointer; input, output and the op's two operand views; the op's kernel args */
  CHECK(mt_state_size(&m) == sizeof(void *) + 4 * sizeof(mt_tensor) + sizeof(mt_op_args));
  CHECK(mt_invoke(&m) == MT_STATUS_OK && g_copies == 1);
  y = mt_output(&m, 0);
  CHECK(y != NULL && y->data == g_arena + 16 && y->rec->size == 4 && y->rec->rank == 2);
  CHECK(memcmp(g_arena + 16, "\1\2\3\4", 4) == 0);
  CHECK(g_begins == 1 && g_ends == 1);
  /* moving the arena rebuilds the op's bind-time views: the kernel runs in the new bytes */
  CHECK(mt_bind_arena(&m, 0, g_arena + 32, 32) == MT_STATUS_OK);
  memcpy(mt_input(&m, 0)->data, "\5\6\7\10", 4);
  CHECK(mt_invoke(&m) == MT_STATUS_OK && g_copies == 2);
  CHECK(memcmp(g_arena + 48, "\5\6\7\10", 4) == 0 && memcmp(g_arena + 16, "\1\2\3\4", 4) == 0);
  CHECK(mt_bind_arena(&m, 0, g_arena, 32) == MT_STATUS_OK);
  CHECK(mt_load(&m, g_file, size, &g_no_kernels) == MT_STATUS_NO_KERNEL);
  CHECK(mt_load(&m, g_file, size, NULL) == MT_STATUS_OK);
  CHECK(mt_invoke(&m) == MT_STATUS_BAD_STATE); /* validate-only load */
}

static void test_api_order_and_arguments(void)
{
  spec s;
  mt_model m;
  uint32_t size;
  copy_program(&s);
  size = assemble(&s);
  CHECK(mt_load(NULL, g_file, size, &g_kernels) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_load(&m, (const uint8_t *)g_file + 4, size, &g_kernels) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_state_size(&m) == 0 && mt_region_count(&m) == 0 && mt_input(&m, 0) == NULL);
  CHECK(mt_bind_state(&m, g_state, sizeof g_state) == MT_STATUS_BAD_STATE);
  CHECK(mt_load(&m, g_file, size, &g_kernels) == MT_STATUS_OK);
  CHECK(mt_bind_arena(&m, 0, g_arena, sizeof g_arena) == MT_STATUS_BAD_STATE);
  CHECK(mt_invoke(&m) == MT_STATUS_BAD_STATE);
  CHECK(mt_bind_state(&m, g_state, mt_state_size(&m) - 1) == MT_STATUS_ARENA_TOO_SMALL);
  CHECK(mt_bind_state(&m, (uint8_t *)g_state + 1, 64) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_bind_state(&m, g_state, sizeof g_state) == MT_STATUS_OK);
  CHECK(mt_input(&m, 0) != NULL && mt_input(&m, 0)->data == NULL); /* arena not bound yet */
  CHECK(mt_invoke(&m) == MT_STATUS_BAD_STATE);
  CHECK(mt_bind_arena(&m, 1, g_arena, sizeof g_arena) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_bind_arena(&m, 0, g_arena + 4, 60) == MT_STATUS_BAD_ARGUMENT); /* misaligned */
  CHECK(mt_bind_arena(&m, 0, g_arena, 31) == MT_STATUS_ARENA_TOO_SMALL);
  CHECK(mt_bind_arena(&m, 0, g_arena, 32) == MT_STATUS_OK);
  CHECK(mt_input(&m, 0)->data == g_arena);
  CHECK(mt_invoke(&m) == MT_STATUS_OK);
}

/* Arenas and state may not overlap the program, each other or the state (a kernel writing an
 * arena would corrupt them): two regions of 32 and 16 bytes. */
static void test_overlapping_memory_refused(void)
{
  spec s;
  mt_model m;
  copy_program(&s);
  memcpy(s.regions[1].name, "ram2", 4);
  s.regions[1].size = 16;
  s.regions[1].alignment = 16;
  s.n_regions = 2;
  CHECK(mt_load(&m, g_file, assemble(&s), &g_kernels) == MT_STATUS_OK);
  CHECK(mt_bind_state(&m, g_file + 16, sizeof g_state) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_bind_state(&m, g_state, sizeof g_state) == MT_STATUS_OK);
  CHECK(mt_bind_arena(&m, 0, g_file + 32, 32) == MT_STATUS_BAD_ARGUMENT); /* the program */
  CHECK(mt_bind_arena(&m, 0, g_state, sizeof g_state) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_bind_arena(&m, 0, g_arena, 32) == MT_STATUS_OK);
  CHECK(mt_bind_arena(&m, 1, g_arena + 16, 16) == MT_STATUS_BAD_ARGUMENT); /* arena 0 */
  CHECK(mt_bind_arena(&m, 1, g_arena + 32, 16) == MT_STATUS_OK); /* adjacent */
  CHECK(mt_bind_arena(&m, 0, g_arena, 32) == MT_STATUS_OK); /* binding it again is fine */
  CHECK(mt_bind_arena(&m, 0, g_arena + 16, 48) == MT_STATUS_BAD_ARGUMENT); /* onto arena 1 */
  CHECK(mt_invoke(&m) == MT_STATUS_OK);
}

/* Overwrite `n` bytes at `offset` of the assembled file, fix the CRC, load. */
static mt_status load_patched(uint32_t size, uint32_t offset, const void *bytes, uint32_t n)
{
  mt_model m;
  uint32_t crc;
  memcpy(g_file + offset, bytes, n);
  crc = mt_crc32(0, g_file + MT_CRC_START, size - MT_CRC_START);
  memcpy(g_file + 12, &crc, 4);
  return mt_load(&m, g_file, size, &g_kernels);
}

/* Offset of section `kind` in the assembled file (section k of assemble() has kind k + 1). */
static uint32_t section_at(uint32_t kind)
{
  mt_section_t e;
  memcpy(&e, g_file + MT_HEADER_RECORD_SIZE + (kind - 1) * MT_SECTION_RECORD_SIZE, sizeof e);
  return e.offset;
}

static void test_corruptions(void)
{
  spec s;
  mt_model m;
  uint32_t size, u32 = 0xFFFFFFFFu, tensors, ops, io, target;
  uint16_t u16 = 99, nomve = MT_TARGET_SWITCH_NOMVE, nodsp = MT_TARGET_SWITCH_NODSP;
  uint16_t unknown = MT_TARGET_SWITCHES_KNOWN + 1u, none = 0;
  copy_program(&s);
  size = assemble(&s);
  target = section_at(MT_SECTION_TARGET);
  tensors = section_at(MT_SECTION_TENSORS);
  ops = section_at(MT_SECTION_OPS);
  io = section_at(MT_SECTION_IO);
  CHECK_IS(mt_load(&m, g_file, 31, &g_kernels), MT_ERR_TRUNCATED);
  CHECK_IS(mt_load(&m, g_file, size - 1, &g_kernels), MT_ERR_TRUNCATED);
  g_file[100] ^= 1;
  CHECK_IS(mt_load(&m, g_file, size, &g_kernels), MT_ERR_BAD_CRC);
  g_file[100] ^= 1;
  CHECK_IS(load_patched(size, 0, "MCUX", 4), MT_ERR_BAD_MAGIC);
  CHECK_IS(load_patched(size, 0, "MCUT\2", 5), MT_ERR_BAD_VERSION);
  CHECK_IS(load_patched(size, 4, "\1", 1), MT_OK);
  CHECK_IS(load_patched(size, 28, "\1", 1), MT_ERR_BAD_HEADER);
  CHECK_IS(load_patched(size, 28, "\0", 1), MT_OK);
  CHECK_IS(load_patched(size, ops, &u16, 2), MT_ERR_BAD_OP);
  u16 = MT_OP_COPY;
  CHECK_IS(load_patched(size, ops, &u16, 2), MT_OK);
  CHECK_IS(load_patched(size, tensors + 48 + 32, "\x20", 1), MT_ERR_BAD_OFFSET);
  CHECK_IS(load_patched(size, tensors + 48 + 32, "\x10", 1), MT_OK);
  /* TARGET switches (Cortex-M55, MVE): +nomve needs ISA dsp, +nodsp is not an M55 switch */
  CHECK_IS(load_patched(size, target + 6, &nomve, 2), MT_ERR_BAD_TARGET);
  CHECK_IS(load_patched(size, target + 4, "\1", 1), MT_OK); /* cortex-m55+nomve, dsp */
  CHECK_IS(load_patched(size, target + 6, &nodsp, 2), MT_ERR_BAD_TARGET);
  CHECK_IS(load_patched(size, target + 6, &unknown, 2), MT_ERR_BAD_TARGET);
  CHECK_IS(load_patched(size, target + 6, &none, 2), MT_ERR_BAD_TARGET); /* M55 is mve */
  CHECK_IS(load_patched(size, target + 4, "\2", 1), MT_OK);
  CHECK_IS(load_patched(size, io + 12, &u32, 4), MT_ERR_BAD_IO);
  CHECK_IS(load_patched(size, MT_HEADER_RECORD_SIZE + 4, "\x08", 1), MT_ERR_BAD_SECTION);
}

static void test_delegate(mt_status answer, int with_cpu, mt_status expect, int copies)
{
  spec s;
  mt_model m;
  uint32_t size;
  delegate_program(&s, with_cpu);
  size = assemble(&s);
  g_copies = g_npu_calls = g_begins = g_ends = 0;
  g_npu_answer = answer;
  CHECK(ready(&m, size, &g_kernels) == MT_STATUS_OK);
  CHECK(mt_invoke(&m) == expect);
  CHECK(g_npu_calls == 1 && g_copies == copies);
  CHECK(g_begins == 1 + copies && g_ends == g_begins);
  CHECK(g_last_call.index == 0 && g_last_call.npu == MT_NPU_ETHOS_U55_128);
  CHECK(g_last_call.command_size == 16);
  CHECK(((const uint8_t *)g_last_call.command_stream)[0] == 0xC5);
  CHECK(g_last_call.weights == NULL && g_last_call.fast_scratch == NULL);
  CHECK(g_last_call.scratch == g_arena && g_last_call.scratch_size == 32);
  CHECK(g_last_call.n_inputs == 1 && g_last_call.inputs[0].data == (void *)g_arena);
  CHECK(g_last_call.n_outputs == 1 && g_last_call.bindings[1].offset == 16);
  if (expect == MT_STATUS_OK) {
    CHECK(memcmp(g_arena + 16, answer == MT_STATUS_OK ? "wwww" : "\1\2\3\4", 4) == 0);
  }
}

static void test_delegate_nesting_refused(void)
{
  spec s;
  mt_model m;
  delegate_program(&s, 1);
  s.ops[1] = s.ops[0]; /* the CPU version is the delegate op itself */
  s.ops[1].flags = MT_OP_FLAG_SUBGRAPH;
  CHECK_IS(mt_load(&m, g_file, assemble(&s), &g_kernels), MT_ERR_BAD_DELEGATE);
  delegate_program(&s, 1);
  s.ops[1].flags = 0;
  CHECK_IS(mt_load(&m, g_file, assemble(&s), &g_kernels), MT_ERR_BAD_OP);
  delegate_program(&s, 1);
  s.regions[0].flags = 0;
  CHECK_IS(mt_load(&m, g_file, assemble(&s), &g_kernels), MT_ERR_BAD_DELEGATE);
}

static void test_status_names_and_crc(void)
{
  CHECK(strcmp(mt_status_name(MT_OK), "ok") == 0);
  CHECK(strcmp(mt_status_name(MT_ERR_BAD_METADATA), "bad_metadata") == 0);
  CHECK(strcmp(mt_status_name(MT_STATUS_NO_NPU), "no_npu") == 0);
  CHECK(strcmp(mt_status_name(-1), "unknown") == 0 && strcmp(mt_status_name(63), "unknown") == 0);
  CHECK(mt_crc32(0, "123456789", 9) == 0xCBF43926u); /* the CRC-32 check value */
  CHECK(mt_crc32(mt_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
}

int main(void)
{
  test_copy_program();
  test_api_order_and_arguments();
  test_overlapping_memory_refused();
  test_corruptions();
  test_delegate(MT_STATUS_NO_NPU, 1, MT_STATUS_OK, 1); /* no NPU: CPU version runs */
  test_delegate(MT_STATUS_OK, 1, MT_STATUS_OK, 0); /* the NPU did it */
  test_delegate(MT_STATUS_NO_NPU, 0, MT_STATUS_NO_NPU, 0); /* no NPU, no CPU version */
  test_delegate(MT_STATUS_BAD_ARGUMENT, 1, MT_STATUS_NPU_FAILED, 0);
  test_delegate_nesting_refused();
  test_status_names_and_crc();
  printf("%s %d checks (%d failed)\n", g_failed ? "FAILED" : "ok", g_checks, g_failed);
  return g_failed ? 1 : 0;
}
