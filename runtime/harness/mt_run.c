/* mt_run.c - run a program file on the host or on board firmware (usage: mt_run.h).
 *
 * The same file builds both: mt_run_host.c or mt_run_board.c supplies files, memory, console
 * and the counter. The kernels are mt_kernels_all (runtime/kernels/mt_kernels_all.c), or with
 * -DMT_RUN_MODEL_KERNELS the compiler's per-model table mt_kernels_model; a build with
 * -DMT_RUN_NO_KERNELS has none and can only --check. */
#include <string.h>

#include "mcutorch.h"
#include "mt_run.h"

#if defined(MT_RUN_NO_KERNELS)
#define MT_RUN_KERNELS NULL
#elif defined(MT_RUN_MODEL_KERNELS) /* selective build: only the model's kernels are linked */
extern const mt_kernel_table mt_kernels_model;
#define MT_RUN_KERNELS (&mt_kernels_model)
#else
extern const mt_kernel_table mt_kernels_all;
#define MT_RUN_KERNELS (&mt_kernels_all)
#endif

#define MT_RUN_MAX_FILES 16
#define MT_RUN_TRY(call)                                                                           \
  do {                                                                                             \
    mt_status mt_run_s_ = (call);                                                                  \
    if (mt_run_s_ != MT_STATUS_OK) {                                                               \
      return mt_run_s_;                                                                            \
    }                                                                                              \
  } while (0)

typedef struct {
  const char *program;
  const char *inputs[MT_RUN_MAX_FILES];
  const char *outputs[MT_RUN_MAX_FILES];
  const char *state; /* -p: the persistent tensors, read before and written after the run */
  int n_inputs, n_outputs;
  uint32_t count; /* inferences (-n) */
  uint32_t reset; /* -r K: mt_reset before every K-th inference (stateful programs) */
} mt_run_args;

static void mt_run_print_int(long v)
{
  char buf[24], *p = buf + sizeof buf - 1;
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  *p = '\0';
  do {
    *--p = (char)('0' + u % 10u);
    u /= 10u;
  } while (u != 0);
  if (v < 0) {
    *--p = '-';
  }
  mt_run_print(p);
}

static void mt_run_print_status(int status, const char *path)
{
  mt_run_print("mt_status ");
  mt_run_print_int(status);
  mt_run_print(" ");
  mt_run_print(mt_status_name(status));
  if (path != NULL) {
    mt_run_print(" ");
    mt_run_print(path);
  }
  mt_run_print("\n");
}

static int mt_run_fail(const char *what, const char *path)
{
  mt_run_print("mt_run: ");
  mt_run_print(what);
  mt_run_print(path != NULL ? path : "");
  mt_run_print("\n");
  mt_run_release();
  return MT_RUN_EXIT_IO;
}

/* --check: validate every file; kernels are not needed to validate the format. */
static int mt_run_check(int argc, char **argv)
{
  mt_model m;
  int i;
  for (i = 2; i < argc; i++) {
    size_t size = 0;
    void *program = mt_run_read_program(argv[i], &size);
    if (program == NULL) {
      return mt_run_fail("cannot read ", argv[i]);
    }
    mt_run_print_status(mt_load(&m, program, size, NULL), argv[i]);
  }
  mt_run_release();
  return 0;
}

static int mt_run_status_names(void)
{
  int s;
  for (s = 0; s < 128; s++) {
    if (strcmp(mt_status_name(s), "unknown") != 0) {
      mt_run_print_int(s);
      mt_run_print(" ");
      mt_run_print(mt_status_name(s));
      mt_run_print("\n");
    }
  }
  return 0;
}

/* A decimal count in [1, 2^31); 0 when `s` is not one. */
static uint32_t mt_run_count(const char *s)
{
  uint32_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > 0x7FFFFFFFu / 10u) {
      return 0;
    }
    v = v * 10u + (uint32_t)(*s - '0');
  }
  return *s == '\0' && v <= 0x7FFFFFFFu ? v : 0;
}

static int mt_run_parse(int argc, char **argv, mt_run_args *a)
{
  int i, to_outputs = 0;
  memset(a, 0, sizeof *a);
  a->count = 1;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0) {
      to_outputs = 1;
    } else if (strcmp(argv[i], "-n") == 0) {
      if (i + 1 == argc || (a->count = mt_run_count(argv[++i])) == 0) {
        return -1;
      }
    } else if (strcmp(argv[i], "-r") == 0) {
      if (i + 1 == argc || (a->reset = mt_run_count(argv[++i])) == 0) {
        return -1;
      }
    } else if (strcmp(argv[i], "-p") == 0) {
      if (i + 1 == argc) {
        return -1;
      }
      a->state = argv[++i];
    } else if (a->program == NULL) {
      a->program = argv[i];
    } else if (to_outputs && a->n_outputs < MT_RUN_MAX_FILES) {
      a->outputs[a->n_outputs++] = argv[i];
    } else if (!to_outputs && a->n_inputs < MT_RUN_MAX_FILES) {
      a->inputs[a->n_inputs++] = argv[i];
    } else {
      return -1;
    }
  }
  return a->program != NULL ? 0 : -1;
}

/* State and arenas from the machine; MT_STATUS_ARENA_TOO_SMALL when it has too little. */
static mt_status mt_run_bind(mt_model *m)
{
  uint32_t r;
  size_t need = mt_state_size(m);
  mt_status status = mt_bind_state(m, mt_run_state(need), need);
  for (r = 0; r < mt_region_count(m) && status == MT_STATUS_OK; r++) {
    const mt_region_t *info = mt_region(m, r);
    char name[sizeof info->name + 1];
    void *mem;
    memcpy(name, info->name, sizeof info->name);
    name[sizeof info->name] = '\0';
    mem = mt_run_arena(r, name, info->size, info->alignment);
    status = mem != NULL ? mt_bind_arena(m, r, mem, info->size) : MT_STATUS_ARENA_TOO_SMALL;
  }
  return status;
}

/* The persistent buffer (stateful programs), from -p's file when given; NULL: none needed. */
static mt_status mt_run_bind_persistent(mt_model *m, const char *path, uint8_t **mem)
{
  size_t n = mt_persistent_size(m);
  if (n == 0) {
    return MT_STATUS_OK;
  }
  *mem = (uint8_t *)mt_run_persistent(n);
  if (*mem == NULL) {
    return MT_STATUS_ARENA_TOO_SMALL;
  }
  MT_RUN_TRY(mt_bind_persistent(m, *mem, n));
  if (path != NULL && mt_run_read(path, *mem, n, 0, 1) != 0) {
    mt_run_fail("cannot read (or wrong size): ", path);
    return MT_STATUS_BAD_ARGUMENT;
  }
  return MT_STATUS_OK;
}

/* Input set `set` of the run into the model's input tensors. */
static int mt_run_inputs(mt_model *m, const mt_run_args *a, uint32_t set)
{
  uint32_t i;
  if ((uint32_t)a->n_inputs != mt_input_count(m)) {
    return mt_run_fail("wrong number of input files for ", a->program);
  }
  for (i = 0; i < mt_input_count(m); i++) {
    mt_tensor *x = mt_input(m, i);
    if (mt_run_read(a->inputs[i], x->data, x->rec->size, set, a->count) != 0) {
      return mt_run_fail("cannot read (or wrong size): ", a->inputs[i]);
    }
  }
  return 0;
}

static int mt_run_outputs(mt_model *m, const mt_run_args *a, uint32_t set)
{
  static const char *const names[] = {"out0.bin", "out1.bin", "out2.bin", "out3.bin"};
  uint32_t i;
  for (i = 0; i < mt_output_count(m); i++) {
    const mt_tensor *y = mt_output(m, i);
    const char *path = i < (uint32_t)a->n_outputs ? a->outputs[i] : i < 4u ? names[i] : NULL;
    if (path == NULL || mt_run_write(path, y->data, y->rec->size, set) != 0) {
      return mt_run_fail("cannot write output file ", path);
    }
  }
  return 0;
}

static int mt_run_once(const mt_run_args *a)
{
  mt_model m;
  size_t size = 0;
  void *program = mt_run_read_program(a->program, &size);
  mt_status status;
  uint32_t set;
  uint8_t *persist = NULL;
  if (program == NULL) {
    return mt_run_fail("cannot read ", a->program);
  }
  status = mt_load(&m, program, size, MT_RUN_KERNELS);
  if (status == MT_STATUS_OK) {
    status = mt_run_bind(&m);
  }
  if (status == MT_STATUS_OK) {
    status = mt_run_bind_persistent(&m, a->state, &persist);
  }
  for (set = 0; set < a->count && status == MT_STATUS_OK; set++) {
    if (mt_run_inputs(&m, a, set) != 0) {
      return MT_RUN_EXIT_IO;
    }
    if (a->reset != 0 && set != 0 && set % a->reset == 0) {
      status = mt_reset(&m);
    }
    mt_run_counter_start();
    status = status == MT_STATUS_OK ? mt_invoke(&m) : status;
    mt_run_counter_stop();
    if (status == MT_STATUS_OK && mt_run_outputs(&m, a, set) != 0) {
      return MT_RUN_EXIT_IO;
    }
  }
  if (status == MT_STATUS_OK && persist != NULL && a->state != NULL &&
      mt_run_write(a->state, persist, mt_persistent_size(&m), 0) != 0) {
    return mt_run_fail("cannot write ", a->state);
  }
  mt_run_print_status(status, NULL);
  mt_run_release();
  return (int)status;
}

int main(int argc, char **argv)
{
  mt_run_args a;
  if (argc >= 2 && strcmp(argv[1], "--check") == 0) {
    return mt_run_check(argc, argv);
  }
  if (argc == 2 && strcmp(argv[1], "--status-names") == 0) {
    return mt_run_status_names();
  }
  if (mt_run_parse(argc, argv, &a) != 0) {
    mt_run_print("usage: mt_run PROGRAM [INPUT ...] [-o OUTPUT ...] [-n COUNT] [-p STATE] [-r K]\n"
                 "       mt_run --check PROGRAM ...\n"
                 "       mt_run --status-names\n");
    return MT_RUN_EXIT_USAGE;
  }
  return mt_run_once(&a);
}
