/*
 * mcutorch.h - the mcutorch C runtime: run a compiled program file on a microcontroller.
 *
 * C99, no heap, no recursion, no printf. The caller owns every byte of memory:
 *
 *   mt_model m;                                   ~100 bytes (32-bit), anywhere
 *   mt_load(&m, program, size, &kernels);         validate EVERY byte; nothing runs yet
 *   mt_bind_state(&m, state, n);                  n >= mt_state_size(&m)
 *   for (r = 0; r < mt_region_count(&m); r++)
 *       mt_bind_arena(&m, r, arena[r], n_r);      n_r >= mt_arena_size(&m, r)
 *   memcpy(mt_input(&m, 0)->data, x, mt_input(&m, 0)->rec->size);
 *   mt_invoke(&m);                                runs every op, in program order
 *   y = mt_output(&m, 0)->data;
 *
 * Every fallible call returns an mt_status: MT_STATUS_OK (0), a load error MT_ERR_* (1..63,
 * mt_program.h; the same reason the Python reader gives for the same file) or a run-time
 * MT_STATUS_* (64.., mt_kernel.h): BAD_ARGUMENT (NULL or misaligned pointer, region index out
 * of range, a state or arena over the program, an arena over the state or another arena; from
 * a kernel: operands it does not support), BAD_STATE (call out of order),
 * ARENA_TOO_SMALL (state or arena), NO_KERNEL, NO_NPU, NPU_FAILED, BAD_INPUT (an input value
 * outside the program's domain: a token id outside [0, V)). mt_status_name() names
 * them. The MT_ERR_* constants are another C enum type: compare them as ints,
 * `(int)mt_load(...) == MT_ERR_BAD_CRC`, or gcc's -Wenum-compare complains.
 *
 * Memory picture (three kinds, all passed in):
 *
 *   program (flash or RAM; start 16-byte aligned; read in place, never written; must outlive m)
 *   +--------+----------------------------+----------------------------------+----------+
 *   | header | records: regions, tensors, | CONST: weights, biases, tables,  | METADATA |
 *   |  CRC32 | ops, operands, attrs, io,  | command streams; every item      | skipped  |
 *   |        | delegates, bindings        | 16-aligned, read by the kernels  |          |
 *   +--------+----------------------------+----------------------------------+----------+
 *
 *   state (RAM, pointer-aligned, mt_state_size(&m) bytes; 28 bytes per op + 8 per operand):
 *   +----------------------+-------------------------+------------------+-------------------+
 *   | void *arena[regions] | mt_tensor per in/output | mt_tensor per op | mt_op_args per op |
 *   |                      | (the user's views)      | operand (views)  | (kernel args)     |
 *   +----------------------+-------------------------+------------------+-------------------+
 *     size = regions * sizeof(void *) + (inputs + outputs + operands) * 8 + ops * 28 on 32-bit
 *     (a view is the data pointer and a pointer to the tensor's record in the program;
 *     a conv: 76 bytes; mcutorch.device.crt.state_size(program) computes it on the host)
 *
 *   arena r (RAM, mt_arena_size(&m, r) bytes, aligned to mt_region(&m, r)->alignment):
 *   +---------+------+---------+------------------+------+--------------+
 *   | input x | t3   | scratch | delegate scratch | t7   | output y ... |   planned offsets:
 *   +---------+------+---------+------------------+------+--------------+   tensors share
 *     bytes in time, never while both are alive; the runtime never clears an arena.
 *
 * Why a state buffer: every op's kernel args are built once, when the state and each arena
 * are bound (again when an arena moves), so mt_invoke costs about 20 instructions per op
 * outside the kernels (bench/dispatch.py counts them exactly). With arenas at addresses fixed
 * at link time the same tables can live in flash instead (mt_bind_static, 2b): no state RAM.
 *
 * Program buffer: 16-byte aligned (constants are 16-aligned inside the file so that kernels
 * may use aligned vector loads), little-endian CPU. METADATA (names, source locations) is
 * skipped: a device build may strip it (`Program.stripped()`).
 *
 * Compile-time switches: MT_SKIP_CRC (fuzzing builds: no CRC check), MT_PROFILE (call the
 * mt_port_op_begin / mt_port_op_end hooks of runtime/port/mt_port.h around every op).
 */
#ifndef MCUTORCH_H
#define MCUTORCH_H

#include <stddef.h>
#include <stdint.h>

#include "mt_kernel.h"
#include "mt_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded program. Caller-owned; its fields are private (use the functions below). */
typedef struct {
  const uint8_t *program;
  const mt_kernel_table *kernels; /* NULL: validate only (mt_invoke refuses) */
  const mt_target_t *target;
  const mt_region_t *regions;
  const mt_tensor_t *tensors;
  const mt_op_t *ops;
  const int32_t *operands;
  const int32_t *attrs;
  const int32_t *io; /* input then output tensor indices */
  const mt_delegate_t *delegates;
  const mt_binding_t *bindings;
  const mt_persistent_t *persistent; /* format 1.5: state kept across invokes */
  const uint8_t *constants;
  uint32_t n_regions, n_tensors, n_ops, n_operands, n_attrs;
  uint32_t n_inputs, n_outputs, n_delegates, n_bindings, const_size, n_persistent;
  void **arenas; /* state: base of each bound arena (NULL = not bound) */
  mt_tensor *views; /* state: input views, output views, then every op's operand views */
  mt_op_args *args; /* state: every op's kernel args */
  uint8_t *persist; /* the bound persistent buffer (NULL = not bound) */
  uint8_t stage; /* MT_STAGE_* below */
  uint8_t fixed; /* 1: bound by mt_bind_static (views and args are the caller's const tables) */
  uint8_t runnable; /* bound with kernels: mt_invoke may run (set by every binding call) */
} mt_model;

enum { MT_STAGE_EMPTY = 0, MT_STAGE_LOADED = 1, MT_STAGE_READY = 2 };

/* 1. Validate `program` (size bytes, 16-aligned) and remember where its records are.
 * Checks everything the Python reader checks, in the same order (same MT_ERR_* for the same
 * bytes; METADATA excepted, which is skipped): records, ranges, counts, each op's operands and
 * aliasing, and lifetimes across ops (MT_ERR_BAD_OP: no op, scratch or Vela scratch writes over
 * a tensor still to be read, no tensor is read before its writer; quadratic in the arena
 * tensors, 16 at a time: mt_validate.c mt_check_lifetimes), then that `kernels` has a function
 * for every (opcode, variant) of the program's non-delegate ops (else MT_STATUS_NO_KERNEL).
 * `kernels` may be NULL to validate only. MT_STATUS_BAD_ARGUMENT: NULL or misaligned pointers. */
mt_status mt_load(mt_model *m, const void *program, size_t size, const mt_kernel_table *kernels);

/* 2. Bytes of state the loaded program needs (see the picture); 0 before mt_load. */
size_t mt_state_size(const mt_model *m);
/* Give the state buffer (pointer-aligned; MT_STATUS_ARENA_TOO_SMALL when too small;
 * MT_STATUS_BAD_ARGUMENT when its mt_state_size bytes meet the program). */
mt_status mt_bind_state(mt_model *m, void *state, size_t size);

/* 2b. Or a binding made ahead of time (export-c and `build --standalone` write it as
 * NAME_binding.c): arenas and the persistent buffer at fixed addresses, and the views and
 * kernel args mt_bind_state would build, as const tables (in flash): no state buffer, 0 bytes
 * of RAM beyond m and the arenas. mt_bind_static checks every entry against what mt_bind_state,
 * mt_bind_arena and mt_bind_persistent would build from the same pointers, and each arena and
 * the persistent buffer as those do (alignment, size, no overlap with the program, the tables
 * or each other): MT_STATUS_BAD_ARGUMENT for any difference, the model then unbound
 * (MT_STAGE_LOADED). Then sets every persistent tensor to its initial value. While bound this
 * way mt_bind_arena and mt_bind_persistent return MT_STATUS_BAD_STATE (mt_bind_state binds
 * afresh). A ring op (streaming state) has its views in the one writable table, ring_views
 * (RAM: 8 B per operand of each ring op, in op order; NULL without ring ops), which
 * mt_bind_static fills from `views` and each call points at the ring's current window. */
typedef struct {
  void *const *arenas; /* n_regions arena bases (NULL for a region of 0 bytes) */
  const uint32_t *arena_sizes; /* n_regions sizes */
  void *persist; /* the persistent buffer (NULL when the program has none) */
  uint32_t persist_size;
  const mt_tensor *views; /* inputs, outputs, then every operand: mt_bind_state's order */
  const mt_op_args *args; /* n_ops, each op's `in`/`out` pointing into views (ring ops: at
                           * their own views in ring_views) */
  mt_tensor *ring_views; /* n_ring_views: every ring op's views, in op order */
  uint32_t n_regions, n_views, n_ops, n_ring_views;
} mt_static_binding;
mt_status mt_bind_static(mt_model *m, const mt_static_binding *b);

/* 3. The memory regions (one arena each) in the program's order, with the planner's needs:
 * name (<= 8 chars, zero padded), size, alignment, NPU reachability. NULL when out of range. */
uint32_t mt_region_count(const mt_model *m);
const mt_region_t *mt_region(const mt_model *m, uint32_t region);
uint32_t mt_arena_size(const mt_model *m, uint32_t region); /* 0 when out of range */
/* Bind arena `region`: `mem` aligned to the region's alignment, `size` >= its size. Its
 * mt_arena_size bytes must not meet the program, the state or another bound arena
 * (MT_STATUS_BAD_ARGUMENT). Needs the state bound first (MT_STATUS_BAD_STATE); may be called
 * again to move an arena. */
mt_status mt_bind_arena(mt_model *m, uint32_t region, void *mem, size_t size);

/* 4. Program inputs and outputs: int8 (usually) NHWC tensors whose data points into the
 * bound arenas. NULL when out of range or before mt_bind_state; data is NULL while the
 * tensor's arena is unbound. The view stays valid until the next call on `m`. */
uint32_t mt_input_count(const mt_model *m);
uint32_t mt_output_count(const mt_model *m);
mt_tensor *mt_input(mt_model *m, uint32_t i);
const mt_tensor *mt_output(mt_model *m, uint32_t i);

/* 4b. Stateful programs (format 1.5): persistent tensors, the model's state, live in one more
 * caller buffer of mt_persistent_size bytes (0: a stateless program), apart from the arenas and
 * kept across invokes. mt_bind_persistent (16-aligned, not over the program or the state;
 * after mt_bind_state) sets every persistent tensor to its initial value; mt_reset does it
 * again (MT_STATUS_BAD_STATE while unbound). The runtime never touches it otherwise. */
size_t mt_persistent_size(const mt_model *m);
mt_status mt_bind_persistent(mt_model *m, void *mem, size_t size);
mt_status mt_reset(mt_model *m);

/* 5. Run every op once. MT_STATUS_BAD_STATE before all arenas (of non-zero size) are bound or
 * when loaded without kernels, or before the persistent buffer is bound; otherwise the first non-OK
 * kernel / delegate status. */
mt_status mt_invoke(mt_model *m);

/* Helpers. */
const char *mt_status_name(int status); /* "ok", "bad_crc", "no_kernel", ... */
uint32_t mt_crc32(uint32_t crc, const void *data, size_t n); /* zlib crc32; start with 0 */

#ifdef __cplusplus
}
#endif
#endif /* MCUTORCH_H */
