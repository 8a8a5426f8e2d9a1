/* mt_exact.c - QEMU TCG plugin: exact guest instruction counts between marker addresses.
 *
 * Built for the host with `gcc -shared -fPIC -O2` (mcutorch.exact.plugin_path() or the
 * Makefile next to this file) and loaded with
 *
 *   qemu-system-arm ... -plugin build/qemu_plugin/mt_exact.so,out=counts.txt,begin=0x1234,...
 *
 * Arguments (each `name=value`; addresses in hex or decimal, Thumb bit 0 ignored; the
 * address arguments may repeat, up to MT_MAX_MARKERS each):
 *   out=PATH     write the results to PATH (default: qemu_plugin_outs, i.e. QEMU's log/stderr)
 *   begin=ADDR   an op region begins when the instruction at ADDR executes
 *   end=ADDR     the open op region ends when the instruction at ADDR executes
 *   tbegin=ADDR  the "total" region begins (e.g. the first instruction of mt_invoke)
 *   tend=ADDR    the "total" region ends (e.g. the instruction after each `bl mt_invoke`)
 *
 * A region holds the instructions executed from its begin marker instruction (included)
 * up to its end marker instruction (excluded) - every instruction the vCPU executes in
 * between, exception handlers included. Marker addresses are the first instructions of the
 * marker functions (or call/return sites), so a region "begin function .. end function"
 * also holds the begin function's own body and the call of the end function.
 *
 * QEMU 7.2 (plugin API version 1) gives plugins no access to guest registers, so the
 * argument of a marker function (e.g. the op index r0 of mt_port_op_begin) cannot be read:
 * regions are numbered by occurrence instead. The k-th begin..end pair is `op<k>`, k = 0, 1,
 * ... in execution order; the caller maps occurrences to op indices (for mt_invoke: the ops
 * in the order the interpreter runs them).
 *
 * Output, one line each, at exit:
 *   mt_exact op<k> <n>        instructions of the k-th op region
 *   mt_exact total <n>        instructions of all total regions (0 if none ran)
 *   mt_exact totals <m>       how many total regions ran (mt_invoke calls)
 *   mt_exact all <n>          every instruction the vCPU executed in the run
 *   mt_exact unmatched <u>    begin while a region was open, or end with none open
 *
 * Counting: every instruction gets an inline QEMU_PLUGIN_INLINE_ADD_U64 of 1 into one
 * 64-bit counter (exact even when a translation block is left early, e.g. on an exception:
 * the add runs per executed instruction, not per block). Only the marker instructions get an
 * exec callback, which snapshots that counter. The board has a single vCPU, so the counter
 * needs no atomics; under `-icount shift=0` the run, and so every count, is deterministic.
 *
 * Debian ships no qemu-plugin.h: the few declarations below are QEMU's stable plugin C ABI
 * (include/qemu/qemu-plugin.h of QEMU 7.2, API version 1; QEMU 7.2 accepts versions 0..1
 * and refuses 2 and up: "plugin requires API version 2, but this QEMU supports only up to
 * version 1").
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU plugin API, version 1 (QEMU 4.2 .. 8.x), the subset this plugin uses ---- */
#define QEMU_PLUGIN_EXPORT  __attribute__((visibility("default")))
#define QEMU_PLUGIN_VERSION 1

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
  const char *target_name;
  struct {
    int min;
    int cur;
  } version;
  bool system_emulation;
  union {
    struct {
      int smp_vcpus;
      int max_vcpus;
    } system;
  };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
  QEMU_PLUGIN_CB_NO_REGS,
  QEMU_PLUGIN_CB_R_REGS,
  QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
  QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv);

/* ---- the plugin ---- */
#define MT_MAX_MARKERS 64

enum mt_kind { MT_BEGIN, MT_END, MT_TBEGIN, MT_TEND, MT_KINDS };
static const char *const mt_kind_names[MT_KINDS] = {"begin", "end", "tbegin", "tend"};

static uint64_t mt_markers[MT_KINDS][MT_MAX_MARKERS];
static size_t mt_n_markers[MT_KINDS];
/* Userdata of the exec callbacks: a pointer into this array encodes the marker kind. */
static const int mt_kind_ids[MT_KINDS] = {MT_BEGIN, MT_END, MT_TBEGIN, MT_TEND};

static uint64_t mt_count; /* instructions executed so far (inline adds) */

static bool mt_op_open;
static uint64_t mt_op_start;
static uint64_t *mt_ops; /* instructions of each op region, in occurrence order */
static size_t mt_n_ops, mt_cap_ops;

static bool mt_total_open;
static uint64_t mt_total_start, mt_total, mt_totals;
static uint64_t mt_unmatched;

static char *mt_out_path;
static bool mt_written;

static void mt_push_op(uint64_t n)
{
  if (mt_n_ops == mt_cap_ops) {
    size_t cap = mt_cap_ops ? 2 * mt_cap_ops : 256;
    uint64_t *p = realloc(mt_ops, cap * sizeof *p);
    if (p == NULL) {
      mt_unmatched++; /* out of host memory: drop the count, flag the run */
      return;
    }
    mt_ops = p;
    mt_cap_ops = cap;
  }
  mt_ops[mt_n_ops++] = n;
}

static void mt_marker_hit(unsigned int vcpu_index, void *userdata)
{
  (void)vcpu_index;
  switch (*(const int *)userdata) {
  case MT_BEGIN:
    if (mt_op_open) {
      mt_unmatched++; /* begin without end: restart the region */
    }
    mt_op_open = true;
    mt_op_start = mt_count;
    break;
  case MT_END:
    if (mt_op_open) {
      mt_push_op(mt_count - mt_op_start);
      mt_op_open = false;
    } else {
      mt_unmatched++;
    }
    break;
  case MT_TBEGIN:
    if (!mt_total_open) { /* re-entry (recursion) keeps the outermost start */
      mt_total_open = true;
      mt_total_start = mt_count;
    }
    break;
  case MT_TEND:
    if (mt_total_open) {
      mt_total += mt_count - mt_total_start;
      mt_totals++;
      mt_total_open = false;
    }
    break;
  default:
    break;
  }
}

static int mt_marker_kind(uint64_t vaddr)
{
  int k;
  size_t i;
  vaddr &= ~(uint64_t)1;
  for (k = 0; k < MT_KINDS; k++) {
    for (i = 0; i < mt_n_markers[k]; i++) {
      if (mt_markers[k][i] == vaddr) {
        return k;
      }
    }
  }
  return -1;
}

static void mt_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
  size_t i, n = qemu_plugin_tb_n_insns(tb);
  (void)id;
  for (i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    int kind = mt_marker_kind(qemu_plugin_insn_vaddr(insn));
    /* Same order for every instruction, so begin and end snapshots agree on whether the
     * marker instruction's own add has happened: differences are exact either way. */
    if (kind >= 0) {
      qemu_plugin_register_vcpu_insn_exec_cb(insn, mt_marker_hit, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)&mt_kind_ids[kind]);
    }
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &mt_count, 1);
  }
}

static void mt_emit(FILE *f, const char *line)
{
  if (f != NULL) {
    fputs(line, f);
  } else {
    qemu_plugin_outs(line);
  }
}

static void mt_write_results(void)
{
  char line[96];
  FILE *f = NULL;
  size_t k;
  if (mt_written) {
    return;
  }
  mt_written = true;
  if (mt_out_path != NULL) {
    f = fopen(mt_out_path, "w");
    if (f == NULL) {
      fprintf(stderr, "mt_exact: cannot write %s\n", mt_out_path);
    }
  }
  for (k = 0; k < mt_n_ops; k++) {
    snprintf(line, sizeof line, "mt_exact op%zu %" PRIu64 "\n", k, mt_ops[k]);
    mt_emit(f, line);
  }
  snprintf(line, sizeof line, "mt_exact total %" PRIu64 "\n", mt_total);
  mt_emit(f, line);
  snprintf(line, sizeof line, "mt_exact totals %" PRIu64 "\n", mt_totals);
  mt_emit(f, line);
  snprintf(line, sizeof line, "mt_exact all %" PRIu64 "\n", mt_count);
  mt_emit(f, line);
  snprintf(line, sizeof line, "mt_exact unmatched %" PRIu64 "\n",
           mt_unmatched + (mt_op_open ? 1u : 0u) + (mt_total_open ? 1u : 0u));
  mt_emit(f, line);
  if (f != NULL) {
    fclose(f);
  }
}

static void mt_atexit_qemu(qemu_plugin_id_t id, void *userdata)
{
  (void)id;
  (void)userdata;
  mt_write_results();
}

/* Also from libc's exit(): a guest semihosting exit may leave QEMU without running the
 * plugin atexit callbacks. Whichever runs first writes; the other does nothing. */
static void mt_atexit_libc(void)
{
  mt_write_results();
}

static int mt_parse_addr(const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;
  if (*s == '\0') {
    return -1;
  }
  v = strtoull(s, &end, 0);
  if (*end != '\0') {
    return -1;
  }
  *out = (uint64_t)v & ~(uint64_t)1;
  return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
  int i, k;
  (void)info;
  for (i = 0; i < argc; i++) {
    const char *arg = argv[i];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : 0;
    int done = 0;
    if (eq == NULL) {
      fprintf(stderr, "mt_exact: bad argument '%s' (want name=value)\n", arg);
      return -1;
    }
    if (len == 3 && strncmp(arg, "out", 3) == 0) {
      free(mt_out_path);
      mt_out_path = strdup(eq + 1);
      continue;
    }
    for (k = 0; k < MT_KINDS && !done; k++) {
      if (len == strlen(mt_kind_names[k]) && strncmp(arg, mt_kind_names[k], len) == 0) {
        uint64_t addr;
        if (mt_parse_addr(eq + 1, &addr) != 0) {
          fprintf(stderr, "mt_exact: bad address in '%s'\n", arg);
          return -1;
        }
        if (mt_n_markers[k] == MT_MAX_MARKERS) {
          fprintf(stderr, "mt_exact: more than %d %s addresses\n", MT_MAX_MARKERS,
                  mt_kind_names[k]);
          return -1;
        }
        mt_markers[k][mt_n_markers[k]++] = addr;
        done = 1;
      }
    }
    if (!done) {
      fprintf(stderr, "mt_exact: unknown argument '%s' (out, begin, end, tbegin, tend)\n", arg);
      return -1;
    }
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, mt_tb_trans);
  qemu_plugin_register_atexit_cb(id, mt_atexit_qemu, NULL);
  atexit(mt_atexit_libc);
  return 0;
}
