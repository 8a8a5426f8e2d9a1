/*
 * mt_bcast.h - numpy broadcasting for the binary element-wise kernels (add, mul, maximum,
 * minimum): y = f(a, b) with a and b right-aligned against y (missing leading dims are 1) and
 * every dim of a or b either y's or 1 (docs/numerics.md, "Broadcasting").
 *
 * mt_bcast_init checks the shape triple and folds y's dims into runs: size-1 dims of y are
 * dropped, neighbouring dims where a and b both follow y (or the same one of them is 1) merge.
 * The innermost merged dim is the run a kernel's inner loop walks, in one of three modes:
 *   MT_BCAST_SAME     a and b both walk the run: same shapes, or a per-channel operand ([C]
 *                     against [..., C]) repeated by the outer loop
 *   MT_BCAST_B_CONST  b is one value along the run: a scalar, or a column ([..., 1])
 *   MT_BCAST_A_CONST  the same with a and b swapped
 * The outer dims (at most 5) are walked by an odometer over element offsets; short per-channel
 * runs are packed several rows per call (mt_bcast_walk).
 *
 * y may be placed over an operand only when that operand has y's element count (the planner's
 * in-place rule), and then it follows y in every dim: each element is read before it is written.
 */
#ifndef MT_BCAST_H
#define MT_BCAST_H

#include "mt_kernel_util.h"

enum { MT_BCAST_SAME = 0, MT_BCAST_B_CONST = 1, MT_BCAST_A_CONST = 2 };

typedef struct {
  uint32_t run; /* elements per inner run */
  uint32_t outer; /* number of runs */
  uint32_t dim[MT_MAX_RANK]; /* outer dims, innermost first */
  uint32_t a_step[MT_MAX_RANK], b_step[MT_MAX_RANK]; /* element steps per outer dim (0: repeat) */
  uint8_t rank; /* outer dims */
  uint8_t mode; /* MT_BCAST_* of the run */
} mt_bcast;

/* Dim i of y (0 = outermost) as seen from t, right-aligned: 1 where t has no such dim. */
static inline uint32_t mt_bcast_dim(const mt_tensor *t, uint8_t y_rank, uint8_t i)
{
  return i + t->rec->rank < y_rank ? 1u : t->rec->shape[i + t->rec->rank - y_rank];
}

/* 1 when y is the numpy broadcast of a and b (rank = the larger rank, at most MT_MAX_RANK),
 * filling bc; 0 otherwise. */
static inline int mt_bcast_init(mt_bcast *bc, const mt_tensor *a, const mt_tensor *b,
                                const mt_tensor *y)
{
  const uint8_t r = y->rec->rank;
  if (r > MT_MAX_RANK || r != (a->rec->rank > b->rec->rank ? a->rec->rank : b->rec->rank)) {
    return 0;
  }
  uint32_t size[MT_MAX_RANK], a_size = 1, b_size = 1;
  uint8_t pat[MT_MAX_RANK], n = 0; /* merged dims, innermost first; pat: bit 0 a, bit 1 b */
  for (uint8_t k = r; k-- > 0;) {
    const uint32_t da = mt_bcast_dim(a, r, k), db = mt_bcast_dim(b, r, k), dy = y->rec->shape[k];
    if (dy != (da == 1 ? db : da) || (da != db && da != 1 && db != 1)) {
      return 0;
    }
    if (dy == 1) {
      continue;
    }
    const uint8_t p = (uint8_t)((da == dy) | ((db == dy) << 1));
    if (n > 0 && pat[n - 1] == p) {
      size[n - 1] *= dy;
    } else {
      size[n] = dy;
      pat[n++] = p;
    }
  }
  bc->run = n > 0 ? size[0] : 1;
  bc->mode =
      n == 0 || pat[0] == 3 ? MT_BCAST_SAME : (pat[0] == 1 ? MT_BCAST_B_CONST : MT_BCAST_A_CONST);
  bc->rank = n > 0 ? (uint8_t)(n - 1) : 0;
  bc->outer = 1;
  if (n > 0) {
    a_size = pat[0] & 1 ? size[0] : 1;
    b_size = pat[0] & 2 ? size[0] : 1;
  }
  for (uint8_t k = 1; k < n; k++) {
    bc->dim[k - 1] = size[k];
    bc->a_step[k - 1] = pat[k] & 1 ? a_size : 0;
    bc->b_step[k - 1] = pat[k] & 2 ? b_size : 0;
    a_size *= pat[k] & 1 ? size[k] : 1;
    b_size *= pat[k] & 2 ? size[k] : 1;
    bc->outer *= size[k];
  }
  return 1;
}

/* The run function of one kernel: y[0..n) from a and b in mode (MT_BCAST_*), n > 0. */
typedef void (*mt_bcast_fn)(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                            const int32_t *attrs);

/* Rows of a per-channel operand packed per call (bytes of stack): see mt_bcast_walk. */
#define MT_BCAST_PACK 256

/* Call fn on every run of y, in y's order. A per-channel operand (a same-shape run whose one
 * operand restarts at every step of the first outer dim, the other moving on by the run) with
 * short runs is copied up to MT_BCAST_PACK bytes times into a stack buffer, so that one call
 * covers several rows: the kernels' vector loops then run long. */
static inline void mt_bcast_walk(const mt_bcast *bc, const int8_t *a, const int8_t *b, int8_t *y,
                                 mt_bcast_fn fn, const int32_t *attrs)
{
  uint32_t idx[MT_MAX_RANK] = {0}, oa = 0, ob = 0;
  const uint32_t run = bc->run;
  int8_t pack[MT_BCAST_PACK];
  const int packed = bc->mode == MT_BCAST_SAME && bc->rank > 0 && 2 * run <= MT_BCAST_PACK &&
                     ((bc->a_step[0] == 0 && bc->b_step[0] == run) ||
                      (bc->b_step[0] == 0 && bc->a_step[0] == run));
  const uint32_t rows = packed ? bc->dim[0] : 1, first = packed ? 1 : 0;
  const uint32_t group = packed ? (MT_BCAST_PACK / run < rows ? MT_BCAST_PACK / run : rows) : 1;
  const int a_rep = packed && bc->a_step[0] == 0;
  if (run == 0) {
    return;
  }
  for (uint32_t r = 0; r < bc->outer; r += rows) {
    if (packed) { /* the repeated operand's run, group times; the other one walks on */
      for (uint32_t j = 0; j < group; j++) {
        __builtin_memcpy(pack + j * run, a_rep ? a + oa : b + ob, run);
      }
      for (uint32_t i = 0; i < rows; i += group) {
        const uint32_t n = (rows - i < group ? rows - i : group) * run, o = i * run;
        fn(a_rep ? pack : a + oa + o, a_rep ? b + ob + o : pack, y + r * run + o, n, MT_BCAST_SAME,
           attrs);
      }
    } else {
      fn(a + oa, b + ob, y + r * run, run, bc->mode, attrs);
    }
    for (uint8_t k = (uint8_t)first; k < bc->rank; k++) { /* next: odometer, innermost first */
      oa += bc->a_step[k];
      ob += bc->b_step[k];
      if (++idx[k] < bc->dim[k]) {
        break;
      }
      idx[k] = 0;
      oa -= bc->a_step[k] * bc->dim[k]; /* unsigned: back to the start of this dim */
      ob -= bc->b_step[k] * bc->dim[k];
    }
  }
}

#endif /* MT_BCAST_H */
