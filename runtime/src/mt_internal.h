/* mt_internal.h - shared by the runtime's own .c files; not part of the API. */
#ifndef MT_INTERNAL_H
#define MT_INTERNAL_H

#include "mcutorch.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the mcutorch runtime reads program records in place: it needs a little-endian CPU"
#endif

/* Return `err` (an MT_ERR_* or MT_STATUS_*) unless `cond` holds. */
#define MT_REQUIRE(cond, err)                                                                      \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      return (mt_status)(err);                                                                     \
    }                                                                                              \
  } while (0)

/* Return the status of `call` unless it is MT_STATUS_OK. */
#define MT_TRY(call)                                                                               \
  do {                                                                                             \
    mt_status mt_try_ = (call);                                                                    \
    if (mt_try_ != MT_STATUS_OK) {                                                                 \
      return mt_try_;                                                                              \
    }                                                                                              \
  } while (0)

/* Counts per opcode from ops.py (MT_VARIADIC = -1: 1..MT_MAX_VARIADIC), its MT_ALIAS_*,
 * MT_<OP>_MAC, MT_<OP>_DTYPES and MT_<OP>_ACT_INPUTS. */
typedef struct {
  int8_t n_inputs;
  int8_t n_outputs;
  uint8_t n_attrs;
  uint8_t n_variants;
  uint8_t alias;
  uint32_t mac;
  uint32_t dtypes; /* MT_DTYPE_PAIR bits; 0 = not checked */
  uint32_t act_inputs; /* the inputs that are activations (bit k: input k) */
} mt_op_counts;

extern const mt_op_counts mt_op_table[MT_OP_COUNT];

/* Bytes per element of a dtype id (checked < MT_DTYPE_COUNT first). */
uint32_t mt_dtype_bytes(uint32_t dtype);

/* prod(dims[0..n)) saturated: any value above UINT32_MAX comes back as UINT32_MAX + 1. */
uint64_t mt_shape_numel(const uint32_t *dims, uint32_t n);

/* A ring window's n (its first dim > 1; 0 when none) and the bytes a tensor occupies in its
 * storage: for a ring window (MT_TENSOR_FLAG_RING, n >= 2) its block, MT_RING_HEAD + (2n - 1)
 * frames of size / n bytes (schema.py, TENSOR); otherwise its size. */
static inline uint32_t mt_ring_slots(const mt_tensor_t *t) /* inline: run on every ring read */
{
  uint32_t k;
  for (k = 0; k < t->rank && t->shape[k] <= 1; k++) {
  }
  return k < t->rank ? t->shape[k] : 0;
}
uint64_t mt_extent(const mt_tensor_t *t);

/* Second half of mt_load: the semantic checks of validate.py, then the op flags, in the
 * Python reader's order. The records are known to be in bounds and well formed. */
mt_status mt_validate_program(const mt_model *m);

/* Binding (mt_invoke.c), shared with mt_bind_static.c:
 * mt_overlap: 1 when bytes [a, a + na) and [b, b + nb) meet (an empty range meets nothing);
 * mt_over_program: 1 when n bytes at p meet the program (bytes of its file_size);
 * mt_view: the view of tensor `index` with the bound arenas / persistent buffer;
 * mt_args_of: op i's kernel args, its operand views at v + first_operand (ops sharing operand
 * records share views), attributes and scratch. */
int mt_overlap(const void *a, size_t na, const void *b, size_t nb);
int mt_over_program(const mt_model *m, const void *p, size_t n);
void mt_view(const mt_model *m, int32_t index, mt_tensor *v);
void mt_args_of(const mt_model *m, uint32_t i, const mt_tensor *v, mt_op_args *a);
void mt_update_runnable(mt_model *m); /* m->runnable: may mt_invoke run (after each binding) */

/* Is op `i` part of some delegate's CPU version? (ranges validated) */
int mt_in_subgraph(const mt_model *m, uint32_t i);

#endif /* MT_INTERNAL_H */
