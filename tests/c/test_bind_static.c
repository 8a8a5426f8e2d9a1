/* test_bind_static.c - a model bound ahead of time (mt_bind_static, NAME_binding.c) on the
 * host: run frame after frame, and every wrong binding refused.
 *
 * Built by tests/py/test_bind_static.py with the runtime core, every kernel and the export-c
 * files of one program under the name `net` (net_program.c, net_binding.c, net_kernels.c),
 * plus net_frames.h (NET_FRAMES inputs sets as bytes, NET_RESET_EVERY), under ASan + UBSan.
 *
 * Prints "out <frame> <k> <hex bytes>" for every output of every invoke (the test compares
 * them with the Python reference), then runs the refusals: a relocated RAM copy of the binding
 * binds; each single wrong entry of it (count, view, record, attrs, scratch, arena alignment,
 * size and place, persistent buffer, ring views) is MT_STATUS_BAD_ARGUMENT and leaves the
 * model unbound (mt_invoke: BAD_STATE). Then mt_bind_arena / mt_bind_persistent are refused
 * while bound statically, and mt_bind_state + arenas bind afresh, giving the same outputs.
 * Last line "ok <n> checks", exit 0; else the failed checks and exit 1. */
#include <stdio.h>
#include <string.h>

#include "net_config.h"
#include "net_frames.h"
#include "net_program.h"

#include "check.h"

enum { MAX_VIEWS = 4096, MAX_OPS = 1024 };

static mt_tensor g_views[MAX_VIEWS];
static mt_op_args g_args[MAX_OPS];
static void *g_arenas[MT_MAX_REGIONS];
static uint32_t g_sizes[MT_MAX_REGIONS];

/* A RAM copy of `b` whose args point into the copied views (ring ops keep the ring table). */
static mt_static_binding relocated(const mt_static_binding *b)
{
  mt_static_binding c = *b;
  uint32_t i;
  memcpy(g_views, b->views, b->n_views * sizeof *g_views);
  memcpy(g_args, b->args, b->n_ops * sizeof *g_args);
  memcpy(g_arenas, b->arenas, b->n_regions * sizeof *g_arenas);
  memcpy(g_sizes, b->arena_sizes, b->n_regions * sizeof *g_sizes);
  for (i = 0; i < b->n_ops; i++) {
    if (g_args[i].in >= b->views && g_args[i].in < b->views + b->n_views) {
      g_args[i].in = g_views + (g_args[i].in - b->views);
      g_args[i].out = g_views + (g_args[i].out - b->views);
    }
  }
  c.views = g_views;
  c.args = g_args;
  c.arenas = g_arenas;
  c.arena_sizes = g_sizes;
  return c;
}

/* Feed frames [0, n) (mt_reset before every NET_RESET_EVERY-th), printing each output. */
static int run_frames(mt_model *m, const char *tag, uint32_t n)
{
  static const uint32_t reset_every = NET_RESET_EVERY;
  uint32_t f, k, off = 0;
  for (f = 0; f < n; f++) {
    if (reset_every && f && f % reset_every == 0 && mt_reset(m) != MT_STATUS_OK) {
      return 1;
    }
    for (k = 0; k < mt_input_count(m); k++) {
      mt_tensor *x = mt_input(m, k);
      memcpy(x->data, net_frame_bytes + off, x->rec->size);
      off += x->rec->size;
    }
    if (mt_invoke(m) != MT_STATUS_OK) {
      return 1;
    }
    for (k = 0; k < mt_output_count(m); k++) {
      const mt_tensor *y = mt_output(m, k);
      uint32_t i;
      printf("%s %u %u ", tag, (unsigned)f, (unsigned)k);
      for (i = 0; i < y->rec->size; i++) {
        printf("%02x", ((const uint8_t *)y->data)[i]);
      }
      printf("\n");
    }
  }
  return 0;
}

/* Bind a relocated copy with one entry made wrong by `spoil` (index `which`). */
typedef void (*spoil_fn)(mt_static_binding *c);

static void refused(mt_model *m, spoil_fn spoil, const char *what)
{
  mt_static_binding c = relocated(&net_binding);
  mt_status s;
  spoil(&c);
  s = mt_bind_static(m, &c);
  if (s != MT_STATUS_BAD_ARGUMENT) {
    printf("not refused: %s (status %d)\n", what, (int)s);
  }
  CHECK(s == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_invoke(m) == MT_STATUS_BAD_STATE);
}

static uint32_t n_io(void)
{
  return NET_INPUT_COUNT + NET_OUTPUT_COUNT;
}

static void fewer_views(mt_static_binding *c)
{
  c->n_views--;
}
static void fewer_ops(mt_static_binding *c)
{
  c->n_ops--;
}
static void view_data(mt_static_binding *c)
{
  g_views[c->n_views - 1].data = (uint8_t *)g_views[c->n_views - 1].data + 1;
}
static void io_view_data(mt_static_binding *c)
{
  (void)c;
  g_views[0].data = (uint8_t *)g_views[0].data + 16;
}
static void view_record(mt_static_binding *c)
{
  g_views[n_io()].rec = g_views[n_io()].rec + 1;
  (void)c;
}
static void attrs(mt_static_binding *c)
{
  g_args[c->n_ops - 1].attrs++;
}
static void scratch_size(mt_static_binding *c)
{
  g_args[0].scratch_size++;
  (void)c;
}
static void n_attrs(mt_static_binding *c)
{
  g_args[0].n_attrs++;
  (void)c;
}
static void in_ptr(mt_static_binding *c)
{
  g_args[c->n_ops - 1].in = g_views;
}
static void arena_misaligned(mt_static_binding *c)
{
  (void)c;
  g_arenas[0] = (uint8_t *)g_arenas[0] + 1;
}
static void arena_small(mt_static_binding *c)
{
  (void)c;
  g_sizes[0]--;
}
static void arena_over_program(mt_static_binding *c)
{
  (void)c;
  g_arenas[0] = (void *)(uintptr_t)net_program;
}
static void arena_over_views(mt_static_binding *c)
{
  (void)c;
  g_arenas[0] = g_views;
}
static void no_persist(mt_static_binding *c)
{
  c->persist = NULL;
}
static void persist_small(mt_static_binding *c)
{
  c->persist_size--;
}
static void persist_over_arena(mt_static_binding *c)
{
  c->persist = g_arenas[0];
}
static void no_ring(mt_static_binding *c)
{
  c->ring_views = NULL;
}
static void ring_short(mt_static_binding *c)
{
  c->n_ring_views--;
}

/* Each wrong entry, and whether it applies only to a stateful / ring program. */
static const struct {
  spoil_fn fn;
  const char *what;
  int stateful, ring;
} spoils[] = {
    {fewer_views, "n_views - 1", 0, 0},
    {fewer_ops, "n_ops - 1", 0, 0},
    {view_data, "last operand view's data + 1", 0, 0},
    {io_view_data, "input view's data + 16", 0, 0},
    {view_record, "first operand view's record + 1", 0, 0},
    {attrs, "last op's attrs + 1", 0, 0},
    {scratch_size, "op 0's scratch_size + 1", 0, 0},
    {n_attrs, "op 0's n_attrs + 1", 0, 0},
    {in_ptr, "last op's in at the I/O views", 0, 0},
    {arena_misaligned, "arena 0 + 1 byte", 0, 0},
    {arena_small, "arena 0 size - 1", 0, 0},
    {arena_over_program, "arena 0 at the program", 0, 0},
    {arena_over_views, "arena 0 over the views table", 0, 0},
    {no_persist, "no persistent buffer", 1, 0},
    {persist_small, "persistent buffer 1 byte short", 1, 0},
    {persist_over_arena, "persistent buffer over arena 0", 1, 0},
    {no_ring, "no ring views", 0, 1},
    {ring_short, "ring views one short", 0, 1},
};

int main(void)
{
  static mt_model m;
  static void *state[(NET_STATE_SIZE * 2) / sizeof(void *) + 8]; /* 64-bit host: 2x */
  static uint8_t arena[NET_ARENA0_SIZE + 16] __attribute__((aligned(16)));
  static uint8_t persist[NET_PERSISTENT_SIZE + 16] __attribute__((aligned(16)));
  mt_static_binding c;
  uint32_t r;
  CHECK(mt_load(&m, net_program, NET_PROGRAM_SIZE, &net_kernels) == MT_STATUS_OK);
  CHECK(mt_bind_static(&m, &net_binding) == MT_STATUS_OK);
  CHECK(run_frames(&m, "out", NET_FRAMES) == 0);

  c = relocated(&net_binding); /* the copy itself is a good binding */
  CHECK(mt_bind_static(&m, &c) == MT_STATUS_OK);
  CHECK(mt_bind_static(&m, NULL) == MT_STATUS_BAD_ARGUMENT);
  CHECK(mt_invoke(&m) == MT_STATUS_BAD_STATE);
  for (r = 0; r < sizeof spoils / sizeof spoils[0]; r++) {
    if ((!spoils[r].stateful || NET_PERSISTENT_SIZE > 0) &&
        (!spoils[r].ring || net_binding.n_ring_views > 0)) {
      refused(&m, spoils[r].fn, spoils[r].what);
    }
  }

  CHECK(mt_bind_static(&m, &net_binding) == MT_STATUS_OK);
  CHECK(mt_bind_arena(&m, 0, arena, sizeof arena) == MT_STATUS_BAD_STATE);
  CHECK(mt_bind_persistent(&m, persist, sizeof persist) == MT_STATUS_BAD_STATE);
  /* the run-time binding afresh: same answers */
  CHECK(mt_bind_state(&m, state, sizeof state) == MT_STATUS_OK);
  for (r = 0; r < mt_region_count(&m); r++) {
    static uint8_t more[4][65536] __attribute__((aligned(64)));
    CHECK(r < 4 && mt_arena_size(&m, r) <= sizeof more[r]);
    CHECK(mt_bind_arena(&m, r, more[r], sizeof more[r]) == MT_STATUS_OK);
  }
  if (NET_PERSISTENT_SIZE > 0) {
    CHECK(mt_bind_persistent(&m, persist, sizeof persist) == MT_STATUS_OK);
  }
  CHECK(run_frames(&m, "dyn", NET_FRAMES) == 0);
  /* and back: the static tables again, persistent state reset */
  CHECK(mt_bind_static(&m, &net_binding) == MT_STATUS_OK);
  CHECK(run_frames(&m, "again", NET_FRAMES) == 0);
  if (g_failed) {
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return 1;
  }
  printf("ok %d checks\n", g_checks);
  return 0;
}
