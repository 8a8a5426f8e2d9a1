/* fuzz_invoke.c - the libFuzzer target of the structure-aware fuzzer (with fuzz_mutator.c):
 * any bytes either fail mt_load with a named error, or load and run with the real kernels
 * (mt_kernels_all) to OK, BAD_ARGUMENT (operands a kernel refuses) or NO_NPU (a delegate without
 * CPU version), without an AddressSanitizer or UBSan report.
 *
 * As in fuzz_loader.c, arenas and state are heap blocks of exactly their sizes (programs
 * needing more than 1 MiB of arenas are only loaded). Arenas start zeroed; the inputs get bytes
 * drawn from the file's CRC, so kernels see varied data. The CRC is checked (no MT_SKIP_CRC):
 * the mutator seals every file it makes.
 *
 * -DFUZZ_SKIP_KNOWN: do not run programs that hit a reported, not yet fixed finding, so that a
 * long run goes on past it (the differential replay, fuzz_replay.c, still runs them):
 *   overlap-memcpy: an op of the memcpy kernels (transpose, concat, pad, max_pool2d) whose output
 *   partially overlaps one of its inputs (the loader accepts it; memcpy of overlapping ranges is
 *   undefined). At exit the count of programs skipped so is printed. */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_bind.h"
#include "mcutorch.h"

#define FUZZ_MAX_ARENA_BYTES (1u << 20)
#define FUZZ_MAX_REGIONS     64

extern const mt_kernel_table mt_kernels_all;
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t g_sink;

#ifdef FUZZ_SKIP_KNOWN
static unsigned long g_skipped, g_runs;

static void fuzz_report(void)
{
  fprintf(stderr, "fuzz_invoke: ran %lu programs, skipped %lu (known finding overlap-memcpy)\n",
          g_runs, g_skipped);
}

static int fuzz_overlaps(const mt_tensor_t *a, const mt_tensor_t *b)
{
  return a->storage == MT_STORAGE_ARENA && b->storage == MT_STORAGE_ARENA &&
         a->region == b->region && a->offset != b->offset &&
         (uint64_t)a->offset < (uint64_t)b->offset + b->size &&
         (uint64_t)b->offset < (uint64_t)a->offset + a->size;
}

/* overlap-memcpy (see the top of the file); the records are validated. */
static int fuzz_known_finding(const mt_model *m)
{
  uint32_t i, j, k;
  for (i = 0; i < m->n_ops; i++) {
    const mt_op_t *op = &m->ops[i];
    const int32_t *in = m->operands + op->first_operand, *out = in + op->n_inputs;
    if (op->opcode != MT_OP_TRANSPOSE && op->opcode != MT_OP_CONCAT && op->opcode != MT_OP_PAD &&
        op->opcode != MT_OP_MAX_POOL2D) {
      continue;
    }
    for (j = 0; j < op->n_outputs; j++) {
      for (k = 0; k < op->n_inputs; k++) {
        if (fuzz_overlaps(&m->tensors[out[j]], &m->tensors[in[k]])) {
          return 1;
        }
      }
    }
  }
  return 0;
}
#endif

static void fuzz_run(mt_model *m, uint32_t seed)
{
  void *arenas[FUZZ_MAX_REGIONS] = {0}, *state, *persist = NULL;
  uint32_t r, k, n = mt_region_count(m);
  uint64_t total = 0;
  mt_status status;
  for (r = 0; r < n; r++) {
    total += mt_arena_size(m, r);
  }
  total += mt_persistent_size(m);
  if (n > FUZZ_MAX_REGIONS || total > FUZZ_MAX_ARENA_BYTES) {
    return;
  }
#ifdef FUZZ_SKIP_KNOWN
  if (fuzz_known_finding(m)) {
    g_skipped++;
    return;
  }
  g_runs++;
#endif
  fuzz_bind(m, &state, arenas, n);
  if (mt_persistent_size(m) != 0 &&
      (posix_memalign(&persist, 16, mt_persistent_size(m)) != 0 ||
       mt_bind_persistent(m, persist, mt_persistent_size(m)) != MT_STATUS_OK)) {
    abort();
  }
  for (r = 0; r < n; r++) {
    memset(arenas[r], 0, mt_region(m, r)->size);
  }
  for (r = 0; r < mt_input_count(m); r++) {
    mt_tensor *x = mt_input(m, r);
    uint8_t *p = (uint8_t *)x->data;
    for (k = 0; k < x->rec->size; k++) {
      seed ^= seed << 13;
      seed ^= seed >> 17;
      seed ^= seed << 5;
      p[k] = (uint8_t)seed;
    }
  }
  status = mt_invoke(m);
  if (status != MT_STATUS_OK && status != MT_STATUS_BAD_ARGUMENT && status != MT_STATUS_NO_NPU) {
    abort();
  }
  for (r = 0; r < mt_output_count(m); r++) {
    const mt_tensor *y = mt_output(m, r);
    for (k = 0; k < y->rec->size; k++) {
      g_sink ^= ((const volatile uint8_t *)y->data)[k];
    }
  }
  for (r = 0; r < n; r++) {
    free(arenas[r]);
  }
  free(state);
  free(persist);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static uint8_t *copy;
  mt_model m;
  mt_status status;
  uint32_t seed = 0x9E3779B9u;
#ifdef FUZZ_SKIP_KNOWN
  static int reported;
  if (!reported) {
    reported = 1;
    atexit(fuzz_report);
  }
#endif
  free(copy);
  copy = NULL;
  if (posix_memalign((void **)&copy, 16, size != 0 ? size : 1) != 0) {
    abort();
  }
  memcpy(copy, data, size); /* the program buffer must be 16-aligned: exact-size copy */
  if (size >= 16) {
    memcpy(&seed, data + 12, 4); /* the CRC: another program, other inputs */
    seed |= 1u;
  }
  status = mt_load(&m, copy, size, &mt_kernels_all);
  if (status == MT_STATUS_OK) {
    fuzz_run(&m, seed);
  } else if ((int)status < (int)MT_ERR_TRUNCATED || (int)status > (int)MT_ERR_BAD_PERSISTENT) {
    abort(); /* only named load errors */
  }
  return 0;
}
