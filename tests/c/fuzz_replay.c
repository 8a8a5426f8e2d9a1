/* fuzz_replay.c - the C half of the differential check of tests/py/fuzzing.py: run many
 * program files, each once, with the real kernels, and say what happened.
 *
 *   fuzz_replay FILE ...
 *
 * For each FILE: load it (mt_kernels_all), bind a state buffer and arenas of exactly the
 * region sizes (heap blocks, so AddressSanitizer sees a byte too far) filled with zeros like the
 * Python interpreter's arenas, copy FILE.in (the inputs' raw bytes back to back) into the input
 * tensors, invoke, write the outputs' bytes back to back to FILE.out. Prints "run FILE" before
 * and "status CODE STEP FILE" after each file (STEP: load, bind or invoke, the call that gave
 * CODE, its mt_status; CODE -1 when FILE.in does not hold the inputs' bytes, -2 when the arenas
 * exceed FUZZ_REPLAY_MAX_ARENA), so a sanitizer abort names the file that caused it. Exits 0 unless
 * a file cannot be read. */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcutorch.h"
#include "mt_port.h"

#define FUZZ_REPLAY_MAX_ARENA   (16u << 20) /* bytes of all arenas together */
#define FUZZ_REPLAY_MAX_REGIONS 64

extern const mt_kernel_table mt_kernels_all;

static void *g_arenas[FUZZ_REPLAY_MAX_REGIONS];
static size_t g_sizes[FUZZ_REPLAY_MAX_REGIONS];
static uint32_t g_regions;
static int g_trace;

void mt_port_op_begin(uint32_t op)
{
  (void)op;
}

void mt_port_op_end(uint32_t op)
{
  uint32_t r;
  for (r = 0; g_trace && r < g_regions; r++) {
    printf("op %u %u %08x\n", (unsigned)op, (unsigned)r,
           (unsigned)mt_crc32(0, g_arenas[r], g_sizes[r]));
  }
}

/* The whole file in a 16-aligned block of exactly its size; NULL when it cannot be read. */
static void *replay_read(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  void *p = NULL;
  long n;
  if (f == NULL) {
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
      posix_memalign(&p, 16, n != 0 ? (size_t)n : 1) != 0 ||
      fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  } else {
    *size = (size_t)n;
  }
  fclose(f);
  return p;
}

static int replay_write(const char *path, mt_model *m)
{
  FILE *f = fopen(path, "wb");
  uint32_t i;
  int ok = f != NULL;
  for (i = 0; ok && i < mt_output_count(m); i++) {
    const mt_tensor *y = mt_output(m, i);
    ok = y->rec->size == 0 || fwrite(y->data, 1, y->rec->size, f) == y->rec->size;
  }
  if (f != NULL && fclose(f) != 0) {
    ok = 0;
  }
  return ok;
}

/* Copy the inputs in; 0 when `in` does not hold exactly their bytes. */
static int replay_inputs(mt_model *m, const uint8_t *in, size_t in_size)
{
  size_t at = 0;
  uint32_t i;
  for (i = 0; i < mt_input_count(m); i++) {
    mt_tensor *x = mt_input(m, i);
    if (x->rec->size > in_size - at) {
      return 0;
    }
    if (x->rec->size != 0) {
      memcpy(x->data, in + at, x->rec->size);
    }
    at += x->rec->size;
  }
  return at == in_size;
}

static int replay_one(const char *path, const char *in_path, const char *out_path,
                      const char **step)
{
  void *arenas[FUZZ_REPLAY_MAX_REGIONS] = {0}, *state = NULL, *program, *in = NULL;
  void *persist = NULL;
  size_t size = 0, in_size = 0;
  uint64_t total = 0;
  uint32_t r, n = 0;
  mt_model m;
  int status;
  program = replay_read(path, &size);
  if (program == NULL) {
    return -100;
  }
  *step = "load";
  status = (int)mt_load(&m, program, size, &mt_kernels_all);
  if (status == MT_STATUS_OK) {
    *step = "bind";
    n = mt_region_count(&m);
    for (r = 0; r < n; r++) {
      total += mt_arena_size(&m, r);
    }
    total += mt_persistent_size(&m);
    if (n > FUZZ_REPLAY_MAX_REGIONS || total > FUZZ_REPLAY_MAX_ARENA) {
      n = 0;
      status = -2;
    }
  }
  if (status == MT_STATUS_OK) {
    size_t need = mt_state_size(&m);
    if (posix_memalign(&state, sizeof(void *), need != 0 ? need : 1) != 0) {
      abort();
    }
    status = (int)mt_bind_state(&m, state, need);
  }
  for (r = 0; r < n && status == MT_STATUS_OK; r++) {
    const mt_region_t *info = mt_region(&m, r);
    size_t align = info->alignment < sizeof(void *) ? sizeof(void *) : info->alignment;
    if (posix_memalign(&arenas[r], align, info->size != 0 ? info->size : 1) != 0) {
      abort();
    }
    memset(arenas[r], 0, info->size); /* as the Python interpreter's np.zeros arenas */
    g_arenas[r] = arenas[r];
    g_sizes[r] = info->size;
    g_regions = r + 1;
    status = (int)mt_bind_arena(&m, r, arenas[r], info->size);
  }
  if (status == MT_STATUS_OK && mt_persistent_size(&m) != 0) { /* initial values, as Python */
    if (posix_memalign(&persist, 16, mt_persistent_size(&m)) != 0) {
      abort();
    }
    status = (int)mt_bind_persistent(&m, persist, mt_persistent_size(&m));
  }
  if (status == MT_STATUS_OK) {
    in = replay_read(in_path, &in_size);
    if (in == NULL && mt_input_count(&m) != 0) {
      status = -1;
    } else if (!replay_inputs(&m, (const uint8_t *)in, in == NULL ? 0 : in_size)) {
      status = -1;
    }
  }
  if (status == MT_STATUS_OK) {
    *step = "invoke";
    status = (int)mt_invoke(&m);
    if (status == MT_STATUS_OK && !replay_write(out_path, &m)) {
      status = -100;
    }
  }
  g_regions = 0;
  for (r = 0; r < n; r++) {
    free(arenas[r]);
  }
  free(state);
  free(persist);
  free(in);
  free(program);
  return status;
}

int main(int argc, char **argv)
{
  int i;
  g_trace = getenv("FUZZ_REPLAY_TRACE") != NULL;
  for (i = 1; i < argc; i++) {
    size_t n = strlen(argv[i]);
    char *in = malloc(n + 5), *out = malloc(n + 5);
    const char *step = "load";
    int status;
    if (in == NULL || out == NULL) {
      return 2;
    }
    memcpy(in, argv[i], n);
    memcpy(in + n, ".in", 4);
    memcpy(out, argv[i], n);
    memcpy(out + n, ".out", 5);
    printf("run %s\n", argv[i]);
    fflush(stdout);
    status = replay_one(argv[i], in, out, &step);
    free(in);
    free(out);
    if (status == -100) {
      printf("cannot read or write %s\n", argv[i]);
      return 2;
    }
    printf("status %d %s %s\n", status, step, argv[i]);
    fflush(stdout);
  }
  return 0;
}
