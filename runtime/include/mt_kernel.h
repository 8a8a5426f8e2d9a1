/*
 * mt_kernel.h - the contract between the mcutorch interpreter and its int8 kernels.
 *
 * At bind time the interpreter builds each op's mt_op_args (tensor views with data pointers
 * into the caller's arenas or the program's constants, the op's int32 attributes in ops.py
 * order, its planned scratch) in the state buffer; mt_invoke calls the kernel chosen for the
 * op's (opcode, variant) through the model's kernel table:
 *
 *     status = table[opcode][variant](&args);
 *
 * Kernels:
 *   - are named mt_<op>[_<variant>]_s8 and live in runtime/kernels/<family>/, one public
 *     function per file;
 *   - read operands as args->in[k] / args->out[k] with the MT_<OP>_IN_* / MT_<OP>_OUT_* indices
 *     and attributes as args->attrs[MT_<OP>_<ATTR>] (all generated in mt_program.h);
 *   - never allocate: scratch comes planned in args->scratch (size from the Python twin in
 *     mcutorch.backends.cortex_m); a missing buffer returns MT_STATUS_BAD_ARGUMENT;
 *   - are bit-exact with the Python reference kernels (mcutorch.ref, docs/numerics.md);
 *   - element-wise kernels (clamp, lut, rescale, add, mul, maximum, minimum; MT_ALIAS_INPLACE)
 *     must allow out == in (the planner may place the output over an input that dies at this
 *     op): read element i before writing element i, walking forward. The loader refuses every
 *     other overlap of an output with an input, another output or the scratch (bad_op).
 * The loader validated every record, but not that an op's operand shapes fit together:
 * kernels refuse inconsistent operands with MT_STATUS_BAD_ARGUMENT. Views persist across
 * invokes: never write one (only its data); constant data may be in flash (never write it).
 */
#ifndef MT_KERNEL_H
#define MT_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "mt_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Run-time status of kernels and the interpreter; load errors are the MT_ERR_* of
 * mt_program.h (1..63), run-time statuses start at MT_RUNTIME_STATUS_BASE. */
typedef enum {
  MT_STATUS_OK = 0,
  MT_STATUS_BAD_ARGUMENT = 64, /* a kernel got operands it does not support */
  MT_STATUS_NO_KERNEL = 65, /* the model's kernel table lacks (opcode, variant) */
  MT_STATUS_BAD_STATE = 66, /* API called out of order (e.g. invoke before arenas bound) */
  MT_STATUS_ARENA_TOO_SMALL = 67,
  MT_STATUS_NPU_FAILED = 68, /* the Ethos-U driver hook returned an error */
  MT_STATUS_NO_NPU = 69, /* a delegate without CPU version and no NPU driver linked */
  MT_STATUS_BAD_INPUT = 70 /* an input value outside the program's domain (a token id >= V) */
} mt_status;

/* A tensor as a kernel sees it: its data and its record in the program (mt_program.h,
 * mt_tensor_t: logical shape, rank <= 6, NHWC for 4-D; dtype; zero point; size in bytes), read
 * in place. Only the data pointer is resolved at bind time, so a view costs two pointers of
 * state. A kernel that needs a view of another shape (a block of rows, a row of a state) makes
 * its own record on its stack (conv2d_add's row blocks, norm's reduced shape, mt_recurrent.h). */
typedef struct {
  void *data;
  const mt_tensor_t *rec;
} mt_tensor;

typedef struct {
  const mt_tensor *in; /* n_in operand views, ops.py operand order */
  mt_tensor *out; /* n_out */
  const int32_t *attrs; /* n_attrs, ops.py order */
  void *scratch; /* planned scratch (NULL when the op needs none) */
  uint32_t scratch_size;
  uint16_t n_in;
  uint16_t n_out;
  uint16_t n_attrs;
  uint16_t dispatch; /* the interpreter's: 0 a plain op; MT_DISPATCH_OTHER a delegate or an op of
                      * a delegate's CPU version; else 1 + its last input that is a ring window */
} mt_op_args;

#define MT_DISPATCH_OTHER 0xFFFFu

typedef mt_status (*mt_kernel_fn)(const mt_op_args *args);

/* One row per opcode: the function for each kernel variant (NULL = not linked). The compiler
 * emits a table with only the model's kernels; mt_kernels_all.c links every kernel. */
typedef struct {
  mt_kernel_fn variants[4];
} mt_kernel_row;

typedef struct {
  const mt_kernel_row *rows; /* indexed by opcode */
  uint16_t n_rows;
} mt_kernel_table;

#ifdef __cplusplus
}
#endif
#endif /* MT_KERNEL_H */
