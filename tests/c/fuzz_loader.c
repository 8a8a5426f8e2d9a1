/* fuzz_loader.c - libFuzzer target for the runtime core: any bytes either fail mt_load with a
 * status, or load and then run with "touching" kernels that read every input byte and write
 * every output and scratch byte, so AddressSanitizer sees any view, scratch area, delegate
 * area or operand list the validator let through that lies outside the caller's memory.
 *
 *   clang -fsanitize=fuzzer,address,undefined -DMT_SKIP_CRC -Iruntime/include -Iruntime/port \
 *       (runtime/src and runtime/port .c files) tests/c/fuzz_loader.c -o fuzz_loader
 *   ./fuzz_loader -runs=20000 corpus/      (seeds: real compiled programs)
 *
 * Arenas are heap blocks of exactly the region sizes (programs needing more than 1 MiB in all
 * are only loaded, not run). With -DFUZZ_REAL_KERNELS (and the kernel sources) the real kernels
 * of mt_kernels_all run instead: they must refuse inconsistent operands with
 * MT_STATUS_BAD_ARGUMENT, never read or write outside them. */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_bind.h"
#include "mcutorch.h"
#include "mt_port.h"

#define FUZZ_MAX_ARENA_BYTES (1u << 20)

static volatile uint8_t g_sink;

static void touch_in(const void *data, uint32_t size)
{
  const volatile uint8_t *p = (const volatile uint8_t *)data;
  uint32_t k;
  for (k = 0; k < size; k++) {
    g_sink ^= p[k];
  }
}

static void touch_out(void *data, uint32_t size)
{
  if (size != 0) {
    memset(data, 0x5A, size);
  }
}

static mt_status touch_kernel(const mt_op_args *a)
{
  uint16_t k;
  for (k = 0; k < a->n_in; k++) {
    touch_in(a->in[k].data, a->in[k].rec->size);
  }
  for (k = 0; k < a->n_attrs; k++) {
    g_sink ^= (uint8_t)a->attrs[k];
  }
  for (k = 0; k < a->n_out; k++) {
    touch_out(a->out[k].data, a->out[k].rec->size);
  }
  touch_out(a->scratch, a->scratch_size);
  return MT_STATUS_OK;
}

/* The NPU hook touches everything a driver could: streams, areas, I/O; then says "no NPU" so
 * that the CPU version runs too. */
mt_status mt_ethosu_invoke(const mt_delegate_call *c)
{
  uint16_t k;
  touch_in(c->command_stream, c->command_size);
  touch_in(c->weights, c->weights_size);
  touch_out(c->scratch, c->scratch_size);
  touch_out(c->fast_scratch, c->fast_scratch_size);
  for (k = 0; k < c->n_inputs; k++) {
    touch_in(c->inputs[k].data, c->inputs[k].rec->size);
  }
  for (k = 0; k < c->n_outputs; k++) {
    touch_out(c->outputs[k].data, c->outputs[k].rec->size);
  }
  return MT_STATUS_NO_NPU;
}

static mt_kernel_row g_rows[MT_OP_COUNT];
#ifdef FUZZ_REAL_KERNELS
extern const mt_kernel_table mt_kernels_all;
#define FUZZ_KERNELS        (&mt_kernels_all)
#define FUZZ_RUN_OK(status) ((status) == MT_STATUS_OK || (status) == MT_STATUS_BAD_ARGUMENT)
#else
static const mt_kernel_table g_touch_kernels = {g_rows, MT_OP_COUNT};
#define FUZZ_KERNELS        (&g_touch_kernels)
#define FUZZ_RUN_OK(status) ((status) == MT_STATUS_OK)
#endif

static void fuzz_run(mt_model *m)
{
  void *arenas[64], *state;
  mt_status status;
  uint32_t r, n = mt_region_count(m);
  uint64_t total = 0;
  for (r = 0; r < n; r++) {
    total += mt_arena_size(m, r);
  }
  if (n > 64 || total > FUZZ_MAX_ARENA_BYTES || mt_state_size(m) > FUZZ_MAX_ARENA_BYTES) {
    return;
  }
  fuzz_bind(m, &state, arenas, n); /* exact sizes: ASan sees a byte too far */
  for (r = 0; r < mt_input_count(m); r++) {
    touch_out(mt_input(m, r)->data, mt_input(m, r)->rec->size);
  }
  status = mt_invoke(m);
  if (!FUZZ_RUN_OK(status) && status != MT_STATUS_NO_NPU) {
    abort(); /* NO_NPU: a delegate without CPU version (the hook never runs one) */
  }
  for (r = 0; r < mt_output_count(m); r++) {
    touch_in(mt_output(m, r)->data, mt_output(m, r)->rec->size);
  }
  for (r = 0; r < n; r++) {
    free(arenas[r]);
  }
  free(state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static uint8_t *copy;
  mt_model m;
  uint32_t op;
  mt_status status;
  if (g_rows[0].variants[0] == NULL) {
    for (op = 0; op < MT_OP_COUNT; op++) {
      g_rows[op].variants[0] = g_rows[op].variants[1] = touch_kernel;
      g_rows[op].variants[2] = g_rows[op].variants[3] = touch_kernel;
    }
  }
  free(copy);
  copy = NULL;
  if (posix_memalign((void **)&copy, 16, size != 0 ? size : 1) != 0) {
    abort();
  }
  memcpy(copy, data, size); /* the program buffer must be 16-aligned: exact-size copy */
  status = mt_load(&m, copy, size, FUZZ_KERNELS);
  if (status == MT_STATUS_OK) {
    fuzz_run(&m);
  } else if ((int)status < (int)MT_ERR_TRUNCATED || (int)status > (int)MT_ERR_BAD_PERSISTENT) {
    abort(); /* only named load errors */
  }
  return 0;
}
