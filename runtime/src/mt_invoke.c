/* mt_invoke.c - state and arena binding, tensor views, the interpreter loop, delegates.
 * Every op's kernel args are built into the state when the state or an arena is bound
 * (mt_build_args); input and output views when the caller asks for them. */
#include <string.h>

#include "mt_internal.h"
#include "mt_port.h"

size_t mt_state_size(const mt_model *m)
{
  uint64_t n;
  if (m == NULL || m->stage == MT_STAGE_EMPTY) {
    return 0;
  }
  n = (uint64_t)m->n_regions * sizeof(void *) +
      ((uint64_t)m->n_inputs + m->n_outputs + m->n_operands) * sizeof(mt_tensor) +
      (uint64_t)m->n_ops * sizeof(mt_op_args);
  return n > (size_t)-1 ? (size_t)-1 : (size_t)n;
}

int mt_overlap(const void *a, size_t na, const void *b, size_t nb)
{
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na != 0 && nb != 0 && x < y + nb && y < x + na;
}

int mt_over_program(const mt_model *m, const void *p, size_t n)
{
  return mt_overlap(p, n, m->program, ((const mt_header_t *)(const void *)m->program)->file_size);
}

/* Address of bytes [offset, ...) of arena `region`; NULL while unbound or for MT_NONE16. */
static void *mt_arena_at(const mt_model *m, uint32_t region, uint32_t offset)
{
  uint8_t *base = region < m->n_regions ? (uint8_t *)m->arenas[region] : NULL;
  return base != NULL ? base + offset : NULL;
}

void mt_view(const mt_model *m, int32_t index, mt_tensor *v)
{
  const mt_tensor_t *t = &m->tensors[index];
  if (t->storage == MT_STORAGE_CONST) {
    v->data = (void *)(uintptr_t)(m->constants + t->offset); /* kernels only read it */
  } else if (t->storage == MT_STORAGE_PERSISTENT) {
    v->data = m->persist != NULL ? m->persist + t->offset : NULL;
  } else {
    v->data = mt_arena_at(m, t->region, t->offset);
  }
  v->rec = t;
}

/* 1 + the last input of op that is a ring window; 0 when none. */
static uint32_t mt_ring_end(const mt_model *m, const mt_op_t *op)
{
  uint32_t k, end = 0;
  for (k = 0; k < op->n_inputs; k++) {
    end = m->tensors[m->operands[op->first_operand + k]].flags & MT_TENSOR_FLAG_RING ? k + 1 : end;
  }
  return end;
}

void mt_args_of(const mt_model *m, uint32_t i, const mt_tensor *v, mt_op_args *a)
{
  const mt_op_t *op = &m->ops[i];
  a->in = v + op->first_operand;
  a->out = (mt_tensor *)(uintptr_t)(v + op->first_operand + op->n_inputs);
  a->attrs = m->attrs + op->first_attr;
  a->scratch = mt_arena_at(m, op->scratch_region, op->scratch_offset);
  a->scratch_size = op->scratch_size; /* 0 without a scratch region (checked at load) */
  a->n_in = op->n_inputs;
  a->n_out = op->n_outputs;
  a->n_attrs = op->n_attrs;
  a->dispatch = op->opcode == MT_OP_DELEGATE || (op->flags & MT_OP_FLAG_SUBGRAPH)
                    ? MT_DISPATCH_OTHER
                    : (uint16_t)mt_ring_end(m, op);
}

/* Every op's operand views and kernel args, into the state (only the operand records an op
 * names: the loader checked those). Redone when an arena moves. */
static void mt_build_args(mt_model *m)
{
  mt_tensor *v = m->views + m->n_inputs + m->n_outputs;
  uint32_t i, k;
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    for (k = op->first_operand; k < op->first_operand + op->n_inputs + op->n_outputs; k++) {
      mt_view(m, m->operands[k], &v[k]);
    }
    mt_args_of(m, i, v, &m->args[i]);
  }
}

mt_status mt_bind_state(mt_model *m, void *state, size_t size)
{
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->stage != MT_STAGE_EMPTY, MT_STATUS_BAD_STATE);
  MT_REQUIRE(state != NULL && (uintptr_t)state % sizeof(void *) == 0, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(size >= mt_state_size(m), MT_STATUS_ARENA_TOO_SMALL);
  MT_REQUIRE(!mt_over_program(m, state, mt_state_size(m)), MT_STATUS_BAD_ARGUMENT);
  if (m->fixed) { /* from a static binding to this one: its buffers are not ours */
    m->fixed = 0;
    m->persist = NULL;
  }
  m->arenas = (void **)state;
  memset(m->arenas, 0, m->n_regions * sizeof(void *));
  m->views = (mt_tensor *)(void *)(m->arenas + m->n_regions);
  m->args = (mt_op_args *)(void *)(m->views + m->n_inputs + m->n_outputs + m->n_operands);
  mt_build_args(m);
  m->stage = MT_STAGE_READY;
  mt_update_runnable(m);
  return MT_STATUS_OK;
}

uint32_t mt_region_count(const mt_model *m)
{
  return m != NULL && m->stage != MT_STAGE_EMPTY ? m->n_regions : 0;
}

const mt_region_t *mt_region(const mt_model *m, uint32_t region)
{
  return region < mt_region_count(m) ? &m->regions[region] : NULL;
}

uint32_t mt_arena_size(const mt_model *m, uint32_t region)
{
  return region < mt_region_count(m) ? m->regions[region].size : 0;
}

mt_status mt_bind_arena(mt_model *m, uint32_t region, void *mem, size_t size)
{
  const mt_region_t *r;
  uint32_t k;
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->stage == MT_STAGE_READY && !m->fixed, MT_STATUS_BAD_STATE);
  MT_REQUIRE(region < m->n_regions, MT_STATUS_BAD_ARGUMENT);
  r = &m->regions[region];
  MT_REQUIRE(mem != NULL && (uintptr_t)mem % r->alignment == 0, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(size >= r->size, MT_STATUS_ARENA_TOO_SMALL);
  /* the r->size bytes used: not over the program, the state or another bound arena */
  MT_REQUIRE(!mt_over_program(m, mem, r->size) &&
                 !mt_overlap(mem, r->size, m->arenas, mt_state_size(m)),
             MT_STATUS_BAD_ARGUMENT);
  for (k = 0; k < m->n_regions; k++) {
    MT_REQUIRE(k == region || m->arenas[k] == NULL ||
                   !mt_overlap(mem, r->size, m->arenas[k], m->regions[k].size),
               MT_STATUS_BAD_ARGUMENT);
  }
  m->arenas[region] = mem;
  mt_build_args(m);
  mt_update_runnable(m);
  return MT_STATUS_OK;
}

uint32_t mt_input_count(const mt_model *m)
{
  return m != NULL && m->stage != MT_STAGE_EMPTY ? m->n_inputs : 0;
}

uint32_t mt_output_count(const mt_model *m)
{
  return m != NULL && m->stage != MT_STAGE_EMPTY ? m->n_outputs : 0;
}

mt_tensor *mt_input(mt_model *m, uint32_t i)
{
  if (m == NULL || m->stage != MT_STAGE_READY || i >= m->n_inputs) {
    return NULL;
  }
  if (!m->fixed) { /* a static binding's views are checked and never written */
    mt_view(m, m->io[i], &m->views[i]);
  }
  return &m->views[i];
}

const mt_tensor *mt_output(mt_model *m, uint32_t i)
{
  if (m == NULL || m->stage != MT_STAGE_READY || i >= m->n_outputs) {
    return NULL;
  }
  if (!m->fixed) {
    mt_view(m, m->io[m->n_inputs + i], &m->views[m->n_inputs + i]);
  }
  return &m->views[m->n_inputs + i];
}

/* Point the view `v` of an op's ring window input (in RAM: the state, or a static binding's ring
 * views) where the ring is now (schema.py, TENSOR): slots p .. p + n - 1 of the block
 * (ring_write's output, the block itself, never moves). A p outside [0, n) (the persistent
 * buffer overwritten by someone else) is refused before anything reads through it. */
static mt_status mt_ring_view(const mt_model *m, mt_tensor *v)
{
  const mt_tensor_t *t = v->rec;
  uint8_t *block = m->persist + t->offset;
  const uint32_t n = mt_ring_slots(t);
  uint32_t p;
  memcpy(&p, block, sizeof p); /* an int32: a negative one is >= n as unsigned */
  MT_REQUIRE(p < n, MT_STATUS_BAD_STATE);
  v->data = block + MT_RING_HEAD + p * (t->size / n);
  return MT_STATUS_OK;
}

/* The ring window inputs of an op whose last one is input end - 1 (mt_op_args.dispatch). */
static mt_status mt_ring_views(const mt_model *m, const mt_op_args *a, uint32_t end)
{
  mt_tensor *v = (mt_tensor *)(uintptr_t)a->in;
  uint32_t k;
  for (k = 0; k + 1 < end; k++) {
    if (v[k].rec->flags & MT_TENSOR_FLAG_RING) {
      MT_TRY(mt_ring_view(m, &v[k]));
    }
  }
  return mt_ring_view(m, &v[end - 1]);
}

/* One op on the CPU: its kernel through the model's table. */
static mt_status mt_run_op(mt_model *m, uint32_t i)
{
  const mt_op_t *op = &m->ops[i];
  mt_status status;
  /* an op of a CPU version: its dispatch kind says so, not where a ring input is */
  if ((op->flags & MT_OP_FLAG_RING) && mt_ring_end(m, op) != 0) {
    MT_TRY(mt_ring_views(m, &m->args[i], mt_ring_end(m, op)));
  }
#ifdef MT_PROFILE
  mt_port_op_begin(i);
#endif
  status = m->kernels->rows[op->opcode].variants[op->variant](&m->args[i]);
#ifdef MT_PROFILE
  mt_port_op_end(i);
#endif
  return status;
}

static void mt_delegate_call_of(mt_model *m, const mt_op_t *op, mt_delegate_call *call)
{
  uint32_t index = (uint32_t)m->attrs[op->first_attr + MT_DELEGATE_INDEX];
  const mt_delegate_t *d = &m->delegates[index];
  memset(call, 0, sizeof *call);
  call->index = index;
  call->npu = d->npu;
  call->n_inputs = d->n_inputs;
  call->n_outputs = d->n_outputs;
  call->command_stream = m->constants + d->command_offset;
  call->command_size = d->command_size;
  call->weights = d->weights_size != 0 ? m->constants + d->weights_offset : NULL;
  call->weights_size = d->weights_size;
  call->scratch = mt_arena_at(m, d->scratch_region, d->scratch_offset);
  call->scratch_size = d->scratch_size;
  if (d->fast_scratch_region != MT_NONE16) {
    call->fast_scratch = mt_arena_at(m, d->fast_scratch_region, d->fast_scratch_offset);
    call->fast_scratch_size = d->fast_scratch_size;
  }
  call->inputs = m->args[op - m->ops].in;
  call->outputs = call->inputs + d->n_inputs;
  call->bindings = m->bindings + d->first_binding;
}

/* The NPU hook first; without an NPU, the delegate's CPU version (ops that are never
 * delegates themselves: the loader refuses nesting, so this does not recurse). */
static mt_status mt_run_delegate(mt_model *m, uint32_t i)
{
  mt_delegate_call call;
  const mt_delegate_t *d;
  mt_status status;
  uint32_t j;
  mt_delegate_call_of(m, &m->ops[i], &call);
  d = &m->delegates[call.index];
#ifdef MT_PROFILE
  mt_port_op_begin(i);
#endif
  status = mt_ethosu_invoke(&call);
#ifdef MT_PROFILE
  mt_port_op_end(i);
#endif
  if (status == MT_STATUS_NO_NPU && d->cpu_first_op != MT_NONE32) {
    for (j = d->cpu_first_op; j < d->cpu_first_op + d->cpu_n_ops; j++) {
      MT_TRY(mt_run_op(m, j));
    }
    return MT_STATUS_OK;
  }
  if (status == MT_STATUS_OK || status == MT_STATUS_NO_NPU) {
    return status;
  }
  return MT_STATUS_NPU_FAILED;
}

size_t mt_persistent_size(const mt_model *m)
{
  uint32_t k, end = 0;
  for (k = 0; m != NULL && m->stage != MT_STAGE_EMPTY && k < m->n_persistent; k++) {
    const mt_tensor_t *t = &m->tensors[m->persistent[k].tensor];
    const uint32_t n = (uint32_t)mt_extent(t); /* validated: offset + extent < 2^32 */
    end = t->offset + n > end ? t->offset + n : end;
  }
  return end;
}

mt_status mt_reset(mt_model *m)
{
  uint32_t k;
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->stage == MT_STAGE_READY && (m->persist != NULL || m->n_persistent == 0),
             MT_STATUS_BAD_STATE);
  for (k = 0; k < m->n_persistent; k++) {
    const mt_tensor_t *t = &m->tensors[m->persistent[k].tensor];
    memcpy(m->persist + t->offset, m->constants + m->persistent[k].init_offset,
           (size_t)mt_extent(t));
  }
  return MT_STATUS_OK;
}

mt_status mt_bind_persistent(mt_model *m, void *mem, size_t size)
{
  size_t n = mt_persistent_size(m);
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->stage == MT_STAGE_READY && !m->fixed, MT_STATUS_BAD_STATE);
  MT_REQUIRE(mem != NULL && (uintptr_t)mem % MT_ALIGN == 0, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(size >= n, MT_STATUS_ARENA_TOO_SMALL);
  MT_REQUIRE(!mt_over_program(m, mem, n) && !mt_overlap(mem, n, m->arenas, mt_state_size(m)),
             MT_STATUS_BAD_ARGUMENT);
  m->persist = (uint8_t *)mem;
  mt_build_args(m); /* the views of persistent tensors point into it */
  mt_update_runnable(m);
  return mt_reset(m);
}

/* Whether mt_invoke may run: bound (every arena of non-zero size, the persistent buffer of a
 * stateful program) with kernels. Kept in m->runnable by every binding call. */
void mt_update_runnable(mt_model *m)
{
  uint32_t r;
  m->runnable = m->stage == MT_STAGE_READY && m->kernels != NULL &&
                (m->persist != NULL || m->n_persistent == 0);
  for (r = 0; m->runnable && r < m->n_regions; r++) {
    m->runnable = m->arenas[r] != NULL || m->regions[r].size == 0;
  }
}

mt_status mt_invoke(mt_model *m)
{
  const mt_op_t *op;
  const mt_op_args *a;
  const mt_kernel_row *rows;
  uint32_t i;
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->runnable, MT_STATUS_BAD_STATE);
  rows = m->kernels->rows;
  for (i = 0, op = m->ops, a = m->args; i < m->n_ops; i++, op++, a++) {
    if (a->dispatch != 0) { /* not a plain op (dispatch: built at bind time) */
      if (a->dispatch == MT_DISPATCH_OTHER) {
        if (!(op->flags & MT_OP_FLAG_SUBGRAPH)) { /* a delegate; else part of a CPU version */
          MT_TRY(mt_run_delegate(m, i));
        }
        continue;
      }
      MT_TRY(mt_ring_views(m, a, a->dispatch)); /* reads a ring: its window, then as any op */
    }
#ifdef MT_PROFILE
    mt_port_op_begin(i);
#endif
    MT_TRY(rows[op->opcode].variants[op->variant](a));
#ifdef MT_PROFILE
    mt_port_op_end(i);
#endif
  }
  return MT_STATUS_OK;
}
