/*
 * mt_embedding_s8.c - nn.Embedding's lookup: y[i, :] = table[ids[i], :] for every index i of an
 * int32 token-id tensor (rank 1..5, a program input) and an int8 table [V, D]; y shares the
 * table's qparams, so each output row is a byte copy of one table row. Every id is checked in
 * [0, V) before anything is read or written: an id outside it is MT_STATUS_BAD_INPUT (the
 * input's values, not the program, are wrong), never an out-of-bounds read.
 */
#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define EMBED_RANK 5 /* ids' rank; y = ids' shape + (D,) has rank <= 6 */

/* 1 when ids is int32 of rank 1..5 with at least one id, the table int8 [V, D] and y int8 of
 * ids' shape + (D,); fills the id count. */
static int embedding_shapes_ok(const mt_op_args *a, uint32_t *n_ids)
{
  const mt_tensor *ids = &a->in[MT_EMBEDDING_IN_IDS], *tab = &a->in[MT_EMBEDDING_IN_TABLE];
  const mt_tensor *y = &a->out[MT_EMBEDDING_OUT_Y];
  if (ids->rec->rank < 1 || ids->rec->rank > EMBED_RANK ||
      !mt_tensor_ok(ids, MT_DTYPE_INT32, ids->rec->rank) || !mt_tensor_ok(tab, MT_DTYPE_INT8, 2) ||
      !mt_tensor_ok(y, MT_DTYPE_INT8, ids->rec->rank + 1) ||
      y->rec->shape[ids->rec->rank] != tab->rec->shape[1]) {
    return 0;
  }
  for (uint8_t k = 0; k < ids->rec->rank; k++) {
    if (y->rec->shape[k] != ids->rec->shape[k]) {
      return 0;
    }
  }
  *n_ids = mt_numel(ids);
  return *n_ids >= 1;
}

// ids: rank r <= 5, int32 in [0, V); table: (V, D) int8  ->  y: ids' shape + (D,), int8
mt_status mt_embedding_s8(const mt_op_args *args)
{
  uint32_t n_ids;
  if (!mt_args_ok(args, MT_EMBEDDING_N_INPUTS, MT_EMBEDDING_N_OUTPUTS, MT_EMBEDDING_N_ATTRS) ||
      !embedding_shapes_ok(args, &n_ids)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *ids = (const int32_t *)args->in[MT_EMBEDDING_IN_IDS].data;
  const int8_t *table = (const int8_t *)args->in[MT_EMBEDDING_IN_TABLE].data;
  const uint32_t rows = args->in[MT_EMBEDDING_IN_TABLE].rec->shape[0];
  const size_t d = args->in[MT_EMBEDDING_IN_TABLE].rec->shape[1];
  int8_t *y = (int8_t *)args->out[MT_EMBEDDING_OUT_Y].data;
  for (uint32_t i = 0; i < n_ids; i++) { /* all ids first: nothing is written on a bad one */
    if (ids[i] < 0 || (uint32_t)ids[i] >= rows) {
      return MT_STATUS_BAD_INPUT;
    }
  }
  for (uint32_t i = 0; i < n_ids; i++) {
    memcpy(y + (size_t)i * d, table + (size_t)ids[i] * d, d);
  }
  return MT_STATUS_OK;
}
