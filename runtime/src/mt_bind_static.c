/* mt_bind_static.c - a binding made ahead of time (mcutorch.h, 2b): the caller's const views
 * and kernel args checked entry by entry against what mt_bind_state would build. Linked only
 * by firmware that calls it (export-c, build --standalone). */
#include <string.h>

#include "mt_internal.h"

/* 1 when no span [p[k], p[k] + n[k]) meets the program or another span (empty ones meet
 * nothing). */
static int mt_spans_apart(const mt_model *m, const void *const *p, const size_t *n, uint32_t count)
{
  uint32_t j, k;
  for (j = 0; j < count; j++) {
    if (mt_over_program(m, p[j], n[j])) {
      return 0;
    }
    for (k = 0; k < j; k++) {
      if (mt_overlap(p[j], n[j], p[k], n[k])) {
        return 0;
      }
    }
  }
  return 1;
}

/* The views, args and buffers mt_bind_state + mt_bind_arena + mt_bind_persistent would give,
 * checked entry by entry (mcutorch.h, 2b). */
mt_status mt_bind_static(mt_model *m, const mt_static_binding *b)
{
  const void *p[MT_MAX_REGIONS + 4];
  size_t n[MT_MAX_REGIONS + 4];
  uint32_t i, n_io, ring = 0, count;
  mt_tensor v;
  mt_op_args a;
  MT_REQUIRE(m != NULL, MT_STATUS_BAD_ARGUMENT);
  MT_REQUIRE(m->stage != MT_STAGE_EMPTY, MT_STATUS_BAD_STATE);
  m->stage = MT_STAGE_LOADED; /* unbound until every check has passed */
  m->runnable = 0;
  m->fixed = 0;
  m->persist = NULL;
  MT_REQUIRE(b != NULL, MT_STATUS_BAD_ARGUMENT);
  n_io = m->n_inputs + m->n_outputs;
  for (i = 0; i < m->n_ops; i++) { /* views of the ring ops, all together */
    ring +=
        m->ops[i].flags & MT_OP_FLAG_RING ? (uint32_t)m->ops[i].n_inputs + m->ops[i].n_outputs : 0;
  }
  MT_REQUIRE(b->n_regions == m->n_regions && b->n_views == n_io + m->n_operands &&
                 b->n_ops == m->n_ops && b->views != NULL && b->args != NULL &&
                 b->n_ring_views >= ring && (ring == 0 || b->ring_views != NULL) &&
                 (m->n_regions == 0 || (b->arenas != NULL && b->arena_sizes != NULL)),
             MT_STATUS_BAD_ARGUMENT);
  for (i = 0; i < m->n_regions; i++) {
    const mt_region_t *r = &m->regions[i];
    MT_REQUIRE((b->arenas[i] != NULL || r->size == 0) &&
                   (uintptr_t)b->arenas[i] % r->alignment == 0 && b->arena_sizes[i] >= r->size,
               MT_STATUS_BAD_ARGUMENT);
    p[i] = b->arenas[i];
    n[i] = r->size;
  }
  MT_REQUIRE(m->n_persistent == 0 || (b->persist != NULL && (uintptr_t)b->persist % MT_ALIGN == 0 &&
                                      b->persist_size >= mt_persistent_size(m)),
             MT_STATUS_BAD_ARGUMENT);
  count = m->n_regions;
  p[count] = b->persist;
  n[count++] = mt_persistent_size(m);
  p[count] = b->ring_views;
  n[count++] = ring * sizeof(mt_tensor);
  p[count] = b->views;
  n[count++] = b->n_views * sizeof(mt_tensor);
  p[count] = b->args;
  n[count++] = m->n_ops * sizeof(mt_op_args);
  MT_REQUIRE(mt_spans_apart(m, p, n, count), MT_STATUS_BAD_ARGUMENT);
  m->arenas = (void **)(uintptr_t)b->arenas; /* only read while fixed */
  m->persist = (uint8_t *)b->persist;
  ring = 0; /* from here: the ring views filled so far */
  for (i = 0; i < n_io; i++) {
    mt_view(m, m->io[i], &v);
    MT_REQUIRE(b->views[i].data == v.data && b->views[i].rec == v.rec, MT_STATUS_BAD_ARGUMENT);
  }
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    const mt_op_args *t = &b->args[i];
    uint32_t k;
    for (k = op->first_operand; k < op->first_operand + op->n_inputs + op->n_outputs; k++) {
      const mt_tensor *w = &b->views[n_io + k]; /* an operand record no op names is not read */
      mt_view(m, m->operands[k], &v);
      MT_REQUIRE(w->data == v.data && w->rec == v.rec, MT_STATUS_BAD_ARGUMENT);
    }
    mt_args_of(m, i, b->views + n_io, &a);
    if (op->flags & MT_OP_FLAG_RING) { /* its own views in ring_views, filled here */
      memcpy(b->ring_views + ring, a.in, ((size_t)a.n_in + a.n_out) * sizeof *a.in);
      a.in = b->ring_views + ring;
      a.out = b->ring_views + ring + a.n_in;
      ring += (uint32_t)a.n_in + a.n_out;
    }
    MT_REQUIRE(t->in == a.in && t->out == a.out && t->attrs == a.attrs && t->scratch == a.scratch &&
                   t->scratch_size == a.scratch_size && t->n_in == a.n_in && t->n_out == a.n_out &&
                   t->n_attrs == a.n_attrs && t->dispatch == a.dispatch,
               MT_STATUS_BAD_ARGUMENT);
  }
  m->views = (mt_tensor *)(uintptr_t)b->views; /* never written while fixed */
  m->args = (mt_op_args *)(uintptr_t)b->args;
  m->fixed = 1;
  m->stage = MT_STAGE_READY;
  mt_update_runnable(m);
  return mt_reset(m);
}
