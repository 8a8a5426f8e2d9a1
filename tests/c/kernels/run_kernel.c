/*
 * run_kernel.c - table-driven test runner for the int8 kernels: one case file, one kernel call.
 *
 *     run_kernel [-v] CASE... | @LIST      (LIST names one case file per line)
 *
 * For each case the runner builds the operands, calls the kernel through mt_kernels_all, and
 * checks the returned status and, for MT_STATUS_OK, every output byte against the expected
 * bytes and the guard bytes after each output. Failures print a diff; the last line is
 * "run_kernel: <n> cases, <f> failed" and the exit status is 1 when f > 0. With -v each case's
 * name is printed before it runs (to name the case a sanitizer stopped at).
 *
 * Case file (little-endian 32-bit words; tests/py/test_kernels_c.py writes them):
 *
 *     header   magic "MTKC", version 1, opcode, variant, expected status,
 *              alias (k: output 0 is placed over input k; 0xFFFFFFFF: its own buffer),
 *              n_attrs, n_in, n_out
 *     attrs    n_attrs int32, ops.py order
 *     tensors  n_in inputs then n_out outputs, each:
 *                dtype, rank, shape[6], zero_point, misalign (data address mod 16),
 *                nbytes, then nbytes of data zero-padded to a multiple of 4
 *              (an output's data is the expected result)
 *
 * `misalign` places int8 data at odd addresses, as a planner may; int32 data stays 4-aligned.
 * A magic or version mismatch says to regenerate the cases (pytest tests/py/test_kernels_c.py).
 */
#include <stdint.h>
#include <string.h>

#include "mt_kernels.h"
#include "rk_io.h"

/* Empty and never inlined, called right before and after the kernel: bench/kernels.py counts
 * the instructions from the entry of one to the entry of the other exactly (mcutorch.exact),
 * i.e. the kernel call alone plus the few instructions of the call itself. */
#if defined(__GNUC__) && !defined(__clang__)
#define RK_MARKER static __attribute__((noinline, noipa)) /* noipa: never merged into one */
#else
#define RK_MARKER static __attribute__((noinline))
#endif
RK_MARKER void rk_kernel_begin(void)
{
  __asm__ volatile("" ::: "memory");
}
RK_MARKER void rk_kernel_end(void)
{
  __asm__ volatile("" ::: "memory");
}

#define RK_MAGIC       0x434B544Du /* "MTKC" */
#define RK_VERSION     1u
#define RK_NONE        0xFFFFFFFFu
#define RK_MAX_ATTRS   32
#define RK_MAX_TENSORS 16
#define RK_GUARD       16u
#define RK_FILL        0x5A
#define RK_PATH_MAX    256
#define RK_MAX_DIFFS   8
#define RK_SCRATCH     8192u /* every case gets this scratch (matmul's b^T: K * N bytes) */

enum {
  H_MAGIC,
  H_VERSION,
  H_OPCODE,
  H_VARIANT,
  H_STATUS,
  H_ALIAS,
  H_N_ATTRS,
  H_N_IN,
  H_N_OUT,
  H_WORDS
};
enum { T_DTYPE, T_RANK, T_SHAPE, T_ZP = T_SHAPE + 6, T_MISALIGN, T_NBYTES, T_WORDS };

typedef struct {
  uint32_t head[H_WORDS];
  int32_t attrs[RK_MAX_ATTRS];
  mt_tensor in[RK_MAX_TENSORS], out[RK_MAX_TENSORS];
  mt_tensor_t in_rec[RK_MAX_TENSORS], out_rec[RK_MAX_TENSORS]; /* the views' records */
  const uint8_t *expected[RK_MAX_TENSORS];
  const uint8_t *buffer[RK_MAX_TENSORS]; /* output allocation: misalign + nbytes + guard */
} rk_case;

/* ---- console --------------------------------------------------------------------------- */

static void rk_print_int(int64_t v)
{
  char buf[24];
  char *p = buf + sizeof buf - 1;
  uint64_t u = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
  *p = '\0';
  do {
    *--p = (char)('0' + u % 10u);
    u /= 10u;
  } while (u != 0);
  if (v < 0) {
    *--p = '-';
  }
  rk_print(p);
}

static int rk_fail(const char *path, const char *what)
{
  rk_print("FAIL ");
  rk_print(path);
  rk_print(": ");
  rk_print(what);
  rk_print("\n");
  return 1;
}

/* "FAIL <path>: <what> <got>, expected <want>" */
static int rk_fail_values(const char *path, const char *what, int64_t got, int64_t want)
{
  rk_print("FAIL ");
  rk_print(path);
  rk_print(": ");
  rk_print(what);
  rk_print(" ");
  rk_print_int(got);
  rk_print(", expected ");
  rk_print_int(want);
  rk_print("\n");
  return 1;
}

/* ---- loading --------------------------------------------------------------------------- */

static int rk_read_exact(int32_t fd, void *buf, uint32_t n)
{
  return rk_read(fd, buf, n) == (int32_t)n;
}

/* Reads one tensor record into rec and points t at it; returns the allocation holding its data
 * (NULL on error). Inputs get their data in place; outputs get a filled buffer + guard, data in
 * *expected. */
static uint8_t *rk_load_tensor(int32_t fd, mt_tensor *t, mt_tensor_t *rec, const uint8_t **expected)
{
  uint32_t w[T_WORDS], pad = 0;
  if (!rk_read_exact(fd, w, sizeof w) || w[T_RANK] > MT_MAX_RANK || w[T_MISALIGN] > 15u) {
    return NULL;
  }
  const uint32_t n = w[T_NBYTES], misalign = w[T_MISALIGN];
  uint8_t *buf = (uint8_t *)rk_alloc(misalign + n + (expected ? RK_GUARD : 0u));
  uint8_t *data = expected ? (uint8_t *)rk_alloc(n) : buf + misalign;
  if (buf == NULL || data == NULL || !rk_read_exact(fd, data, n) ||
      !rk_read_exact(fd, &pad, (4u - n % 4u) % 4u)) {
    return NULL;
  }
  memset(rec, 0, sizeof *rec);
  rec->dtype = (uint8_t)w[T_DTYPE];
  rec->rank = (uint8_t)w[T_RANK];
  memcpy(rec->shape, &w[T_SHAPE], sizeof rec->shape);
  rec->zero_point = (int32_t)w[T_ZP];
  rec->size = n;
  t->rec = rec;
  t->data = buf + misalign;
  if (expected) {
    *expected = data;
    memset(buf, RK_FILL, misalign + n + RK_GUARD);
  }
  return buf;
}

/* NULL when the case loaded; else what is wrong with the file. */
static const char *rk_load(int32_t fd, rk_case *c)
{
  uint32_t *h = c->head;
  if (!rk_read_exact(fd, h, sizeof c->head)) {
    return "truncated header";
  }
  if (h[H_MAGIC] != RK_MAGIC || h[H_VERSION] != RK_VERSION) {
    return "not a version-1 case file: regenerate with pytest tests/py/test_kernels_c.py";
  }
  if (h[H_N_ATTRS] > RK_MAX_ATTRS || h[H_N_IN] > RK_MAX_TENSORS || h[H_N_OUT] > RK_MAX_TENSORS ||
      !rk_read_exact(fd, c->attrs, h[H_N_ATTRS] * 4u)) {
    return "bad attribute or operand count";
  }
  for (uint32_t k = 0; k < h[H_N_IN]; k++) {
    if (rk_load_tensor(fd, &c->in[k], &c->in_rec[k], NULL) == NULL) {
      return "bad input tensor (or out of memory)";
    }
  }
  for (uint32_t k = 0; k < h[H_N_OUT]; k++) {
    if ((c->buffer[k] = rk_load_tensor(fd, &c->out[k], &c->out_rec[k], &c->expected[k])) == NULL) {
      return "bad output tensor (or out of memory)";
    }
  }
  if (h[H_ALIAS] != RK_NONE) { /* in place: output 0 over input `alias` */
    if (h[H_ALIAS] >= h[H_N_IN] || h[H_N_OUT] < 1 ||
        c->in[h[H_ALIAS]].rec->size != c->out[0].rec->size) {
      return "bad alias";
    }
    c->out[0].data = c->in[h[H_ALIAS]].data;
  }
  return NULL;
}

/* ---- checking -------------------------------------------------------------------------- */

static int rk_check_output(const char *path, const rk_case *c, uint32_t k)
{
  const mt_tensor *t = &c->out[k];
  const int8_t *got = (const int8_t *)t->data, *want = (const int8_t *)c->expected[k];
  uint32_t diffs = 0;
  for (uint32_t i = 0; i < t->rec->size; i++) {
    if (got[i] != want[i] && diffs++ < RK_MAX_DIFFS) {
      rk_print("  out");
      rk_print_int(k);
      rk_print("[");
      rk_print_int(i);
      rk_print("] = ");
      rk_print_int(got[i]);
      rk_print(", expected ");
      rk_print_int(want[i]);
      rk_print("\n");
    }
  }
  if (diffs > 0) {
    rk_print("FAIL ");
    rk_print(path);
    rk_print(": ");
    rk_print_int(diffs);
    rk_print(" output bytes differ (the first ones listed above)\n");
    return 1;
  }
  const uint8_t *guard = (const uint8_t *)t->data + t->rec->size;
  for (uint32_t i = 0; c->head[H_ALIAS] == RK_NONE && i < RK_GUARD; i++) {
    if (guard[i] != RK_FILL) {
      return rk_fail_values(path, "wrote past the output, at byte", t->rec->size + i, t->rec->size);
    }
  }
  return 0;
}

/* 0 when the case passes, 1 when it fails. */
static int rk_run_case(const char *path)
{
  static rk_case c;
  memset(&c, 0, sizeof c);
  int32_t fd = rk_open(path);
  if (fd < 0) {
    return rk_fail(path, "cannot open the case file");
  }
  const char *err = rk_load(fd, &c);
  rk_close(fd);
  const uint32_t *h = c.head;
  const mt_kernel_table *table = &mt_kernels_all;
  if (err == NULL && (h[H_OPCODE] >= table->n_rows || h[H_VARIANT] >= 4u ||
                      table->rows[h[H_OPCODE]].variants[h[H_VARIANT]] == NULL)) {
    err = "no kernel for this opcode and variant";
  }
  if (err != NULL) {
    return rk_fail(path, err);
  }
  static uint32_t scratch[RK_SCRATCH / 4];
  const mt_op_args args = {c.in,
                           c.out,
                           c.attrs,
                           scratch,
                           RK_SCRATCH,
                           (uint16_t)h[H_N_IN],
                           (uint16_t)h[H_N_OUT],
                           (uint16_t)h[H_N_ATTRS],
                           0};
  const mt_kernel_fn kernel = table->rows[h[H_OPCODE]].variants[h[H_VARIANT]];
  rk_kernel_begin();
  const mt_status status = kernel(&args);
  rk_kernel_end();
  if ((uint32_t)status != h[H_STATUS]) {
    return rk_fail_values(path, "kernel status", status, h[H_STATUS]);
  }
  for (uint32_t k = 0; status == MT_STATUS_OK && k < h[H_N_OUT]; k++) {
    if (rk_check_output(path, &c, k)) {
      return 1;
    }
  }
  return 0;
}

/* ---- driver ---------------------------------------------------------------------------- */

typedef struct {
  uint32_t cases, failed, verbose;
} rk_stats;

static void rk_run(const char *path, rk_stats *st)
{
  if (st->verbose) {
    rk_print("run ");
    rk_print(path);
    rk_print("\n");
  }
  st->failed += (uint32_t)rk_run_case(path);
  st->cases++;
  rk_release_all();
}

/* Runs every case file named in the list file, one path per line. */
static int rk_run_list(const char *list, rk_stats *st)
{
  char chunk[128], line[RK_PATH_MAX];
  uint32_t len = 0;
  int32_t fd = rk_open(list), got;
  if (fd < 0) {
    return rk_fail(list, "cannot open the list file");
  }
  while ((got = rk_read(fd, chunk, sizeof chunk)) > 0) {
    for (int32_t i = 0; i < got; i++) {
      if (chunk[i] != '\n' && chunk[i] != '\r') {
        line[len < RK_PATH_MAX - 1 ? len++ : len] = chunk[i];
      } else if (len > 0) {
        line[len] = '\0';
        rk_run(line, st);
        len = 0;
      }
    }
  }
  if (len > 0) {
    line[len] = '\0';
    rk_run(line, st);
  }
  rk_close(fd);
  return got < 0;
}

int main(int argc, char **argv)
{
  rk_stats st = {0, 0, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0) {
      st.verbose = 1;
    } else if (argv[i][0] == '@') {
      st.failed += (uint32_t)rk_run_list(argv[i] + 1, &st);
    } else {
      rk_run(argv[i], &st);
    }
  }
  rk_print("run_kernel: ");
  rk_print_int(st.cases);
  rk_print(" cases, ");
  rk_print_int(st.failed);
  rk_print(" failed\n");
  return st.failed > 0 || st.cases == 0;
}
