/*
 * mt_port.h - the hooks a board or an NPU driver supplies to the mcutorch runtime.
 *
 * Every hook has a weak default in mt_port_default.c; define a function with the same name in
 * your firmware to replace it (no registration call, nothing to configure).
 *
 *   hook               default          called
 *   mt_ethosu_invoke   MT_STATUS_NO_NPU by mt_invoke for every `delegate` op
 *   mt_port_op_begin   nothing          before each op's kernel (builds with MT_PROFILE only)
 *   mt_port_op_end     nothing          after it
 *   mt_port_log        nothing          by the harness and user code, never by the core
 */
#ifndef MT_PORT_H
#define MT_PORT_H

#include <stdint.h>

#include "mt_kernel.h"
#include "mt_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Ethos-U subgraph to run: everything a driver needs, resolved to addresses.
 *
 * The usual Ethos-U driver base-address slots map as: 0 = weights, 1 = scratch,
 * 2 = fast_scratch (Vela's region numbers). Inputs and outputs already live inside `scratch`
 * at the offsets Vela chose (bindings[k].offset), so the driver copies nothing: when the hook
 * returns, the outputs must be written. */
typedef struct {
  uint32_t index; /* delegate record index in the program */
  uint16_t npu; /* mt_npu_t the command stream was compiled for */
  uint16_t n_inputs; /* delegate inputs (then n_outputs outputs) */
  uint16_t n_outputs;
  uint16_t reserved;
  const void *command_stream; /* in the program (16-aligned), command_size bytes */
  uint32_t command_size;
  const void *weights; /* in the program (16-aligned); NULL when weights_size is 0 */
  uint32_t weights_size;
  void *scratch; /* Vela's scratch area in an NPU-reachable arena */
  uint32_t scratch_size;
  void *fast_scratch; /* NULL when the delegate has none */
  uint32_t fast_scratch_size;
  const mt_tensor *inputs; /* n_inputs views (data inside scratch) */
  const mt_tensor *outputs; /* n_outputs views */
  const mt_binding_t *bindings; /* n_inputs then n_outputs: offset, Vela 6-D shape, elem size */
} mt_delegate_call;

/* Run one delegate on the NPU. Return MT_STATUS_OK when done, MT_STATUS_NO_NPU when no NPU is
 * present (the runtime then runs the delegate's CPU version, or returns MT_STATUS_NO_NPU when
 * the program has none), anything else on failure (mt_invoke returns MT_STATUS_NPU_FAILED). */
mt_status mt_ethosu_invoke(const mt_delegate_call *call);

/* Profiling: op index of the program (delegate ops, and the ops of a CPU version, each get
 * their own pair). Compiled in only with -DMT_PROFILE. */
void mt_port_op_begin(uint32_t op);
void mt_port_op_end(uint32_t op);

/* One line of text for a human (no newline needed). */
void mt_port_log(const char *line);

#ifdef __cplusplus
}
#endif
#endif /* MT_PORT_H */
