/*
 * mt_matmul.h - the operand shapes shared by mt_matmul_s8 and mt_matmul_s16:
 *   a (.., M, K), b (.., K, N) or (.., N, K) with transpose_b, y (.., M, N)
 * of one dtype and one rank 2..6, each batch dim of a or b y's or 1 (numpy broadcasting), K
 * within the kernel's bound and scratch for one batch of b^T (K N elements) unless transpose_b.
 * Each kernel checks its own attributes (zero points, clamp, mult / shift) beside it.
 */
#ifndef MT_MATMUL_H
#define MT_MATMUL_H

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* 1 when the operands fit (`elem`: bytes per element of `dtype`); then *m, *n, *k are set. */
static inline int mt_matmul_shapes_ok(const mt_op_args *args, uint8_t dtype, uint32_t elem,
                                      uint32_t max_k, uint32_t *m, uint32_t *n, uint32_t *k)
{
  if (!mt_args_ok(args, MT_MATMUL_N_INPUTS, MT_MATMUL_N_OUTPUTS, MT_MATMUL_N_ATTRS)) {
    return 0;
  }
  const mt_tensor *a = &args->in[MT_MATMUL_IN_A], *b = &args->in[MT_MATMUL_IN_B];
  const mt_tensor *y = &args->out[MT_MATMUL_OUT_Y];
  const int32_t tb = args->attrs[MT_MATMUL_TRANSPOSE_B];
  const uint8_t r = y->rec->rank;
  if (r < 2 || r > MT_MAX_RANK || !mt_tensor_ok(a, dtype, r) || !mt_tensor_ok(b, dtype, r) ||
      !mt_tensor_ok(y, dtype, r) || (tb != 0 && tb != 1)) {
    return 0;
  }
  for (uint8_t i = 0; i + 2 < r; i++) {
    const uint32_t da = a->rec->shape[i], db = b->rec->shape[i];
    if (y->rec->shape[i] != (da == 1 ? db : da) || (da != db && da != 1 && db != 1)) {
      return 0;
    }
  }
  *m = a->rec->shape[r - 2], *k = a->rec->shape[r - 1],
  *n = tb ? b->rec->shape[r - 2] : b->rec->shape[r - 1];
  return (tb ? b->rec->shape[r - 1] : b->rec->shape[r - 2]) == *k && y->rec->shape[r - 2] == *m &&
         y->rec->shape[r - 1] == *n && *k <= max_k &&
         (tb || (args->scratch != NULL && args->scratch_size >= (uint64_t)*k * *n * elem));
}

#endif /* MT_MATMUL_H */
