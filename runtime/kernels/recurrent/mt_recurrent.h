/*
 * mt_recurrent.h - what mt_lstm_s8, mt_gru_s8, mt_rnn_tanh_s8 and mt_rnn_relu_s8 share: the
 * operand checks, the state product and calls of the element-wise kernels on views of one batch
 * row.
 *
 * Each op is the composition of the ops of one unrolled step (docs/numerics.md, lstm / gru), so
 * each of those ops runs here through its own kernel - mt_fully_connected_s8 (folded when in_zp
 * is 0: no per-call weight sums) with its MVE / DSP dot-product rows, mt_add_s8, mt_mul_s8,
 * mt_sub_s8 and mt_lut_s8 with theirs, and their int16 bodies for a16w8 - on views into the
 * operands, the state outputs and the planned scratch, with the attributes of each at its prefix
 * (ops/recurrent.py). Per step (G = 4 gates for an LSTM, 3 for a GRU, 1 for an RNN):
 *
 *   scratch [B, G*H] (elements of x's dtype):  s = fc(h)  for every row at once
 *   then per row n, in place in row n of the scratch (each kernel reads element i before it
 *   writes element i, MT_ALIAS_INPLACE), the state in the op's h (and c) outputs:
 *
 *     | gate 0 | gate 1 | ... | gate G-1 |      h[n], c[n]: this row's state
 *
 * and h[n] is copied to y[n, k]. The weights are read in place from the program, once per step.
 */
#ifndef MT_RECURRENT_H
#define MT_RECURRENT_H

#include <string.h>

#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* Return the status of a failing kernel call (the step's operands were refused). */
#define MT_RNN_TRY(call)                                                                           \
  do {                                                                                             \
    const mt_status st_ = (call);                                                                  \
    if (st_ != MT_STATUS_OK) {                                                                     \
      return st_;                                                                                  \
    }                                                                                              \
  } while (0)

typedef struct {
  uint32_t b, t, g, hidden, e; /* batch, time steps, G * H, H, bytes per element */
  uint8_t dtype;
  int32_t steps, start, reverse;
  /* the records of the views the step's kernels get, made once per call of the op: a row of H
   * and of G*H elements, the state [B, H] and the gates [B, G*H] */
  mt_tensor_t row_h, row_g, state, gates;
} mt_rnn;

/* The record of a [rows, cols] tensor of x's dtype (zero point 0), for views of a row, the
 * state or the gates. */
static inline mt_tensor_t mt_rnn_rec(const mt_rnn *r, uint32_t rows, uint32_t cols)
{
  mt_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = r->dtype;
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.size = rows * cols * r->e;
  return t;
}

/* A view of data with the record rec. */
static inline mt_tensor mt_rnn_view(const mt_tensor_t *rec, const void *data)
{
  const mt_tensor v = {(void *)(uintptr_t)data, rec};
  return v;
}

/* The shared operand checks: x [B, T, G*H], weight [G*H, H] int8, h0 / y / h of x's dtype,
 * the step range inside T and the scratch for one step's gates. attrs: steps, start, reverse
 * first (ops/recurrent.py HEAD). */
static inline int mt_rnn_init(mt_rnn *r, const mt_op_args *a, uint32_t gates, int h0)
{
  const mt_tensor *x = &a->in[0], *w = &a->in[1], *h = &a->in[h0];
  const mt_tensor *y = &a->out[0], *hn = &a->out[1];
  const uint8_t dt = x->rec->dtype;
  if ((dt != MT_DTYPE_INT8 && dt != MT_DTYPE_INT16) || !mt_tensor_ok(x, dt, 3) ||
      !mt_tensor_ok(w, MT_DTYPE_INT8, 2) || !mt_tensor_ok(h, dt, 2) || !mt_tensor_ok(y, dt, 3) ||
      !mt_tensor_ok(hn, dt, 2)) {
    return 0;
  }
  r->b = x->rec->shape[0];
  r->t = x->rec->shape[1];
  r->g = x->rec->shape[2];
  r->hidden = h->rec->shape[1];
  r->e = dt == MT_DTYPE_INT16 ? 2u : 1u;
  r->dtype = dt;
  r->steps = a->attrs[0];
  r->start = a->attrs[1];
  r->reverse = a->attrs[2];
  r->row_h = mt_rnn_rec(r, 1, r->hidden);
  r->row_g = mt_rnn_rec(r, 1, r->g);
  r->state = mt_rnn_rec(r, r->b, r->hidden);
  r->gates = mt_rnn_rec(r, r->b, r->g);
  const int64_t end = (int64_t)r->start + (r->reverse ? 1 - (int64_t)r->steps : r->steps - 1);
  return r->hidden >= 1 && r->g == gates * r->hidden && w->rec->shape[0] == r->g &&
         w->rec->shape[1] == r->hidden && h->rec->shape[0] == r->b && hn->rec->shape[0] == r->b &&
         hn->rec->shape[1] == r->hidden && y->rec->shape[0] == r->b &&
         (int64_t)y->rec->shape[1] == r->steps && y->rec->shape[2] == r->hidden && r->steps >= 1 &&
         (r->reverse == 0 || r->reverse == 1) && r->start >= 0 && (uint32_t)r->start < r->t &&
         end >= 0 && end < (int64_t)r->t && a->scratch != NULL &&
         (uint64_t)a->scratch_size >= (uint64_t)r->b * r->g * r->e;
}

/* y = fn(a, b) on n elements (add, sub, mul with their n_attrs attributes at at). Inlined into
 * one function per kernel (mt_rnn_add, mt_rnn_mul, mt_rnn_sub): fn is then a direct call, which
 * the stack bound (mcutorch.device.stack) follows. */
static MT_ALWAYS_INLINE mt_status mt_rnn_binary(mt_kernel_fn fn, const mt_rnn *r, uint32_t n,
                                                const void *a, const void *b, void *y,
                                                const int32_t *at, uint16_t n_attrs)
{
  mt_tensor_t own; /* n is H or G*H in every caller; any other n gets its own record */
  const mt_tensor_t *row = n == r->hidden ? &r->row_h
                           : n == r->g    ? &r->row_g
                                          : (own = mt_rnn_rec(r, 1, n), &own);
  const mt_tensor in[2] = {mt_rnn_view(row, a), mt_rnn_view(row, b)};
  mt_tensor out = mt_rnn_view(row, y);
  const mt_op_args args = {in, &out, at, NULL, 0, 2, 1, n_attrs, 0};
  return fn(&args);
}

#define MT_RNN_BINARY(name, fn)                                                                    \
  static inline mt_status name(const mt_rnn *r, uint32_t n, const void *a, const void *b, void *y, \
                               const int32_t *at, uint16_t n_attrs)                                \
  {                                                                                                \
    return mt_rnn_binary(fn, r, n, a, b, y, at, n_attrs);                                          \
  }
MT_RNN_BINARY(mt_rnn_add, mt_add_s8)
MT_RNN_BINARY(mt_rnn_mul, mt_mul_s8)
MT_RNN_BINARY(mt_rnn_sub, mt_sub_s8)

/* y = lut(x, table) on H elements. */
static inline mt_status mt_rnn_lut(const mt_rnn *r, const void *x, const mt_tensor *table, void *y)
{
  const mt_tensor in[2] = {mt_rnn_view(&r->row_h, x), *table};
  mt_tensor out = mt_rnn_view(&r->row_h, y);
  const mt_op_args args = {in, &out, NULL, NULL, 0, 2, 1, 0, 0};
  return mt_lut_s8(&args);
}

/* scratch[B, G*H] = fc(h; weight, bias, mult, shift) with fc's attributes at at (in_zp first). */
static inline mt_status mt_rnn_product(const mt_rnn *r, const mt_op_args *a, const void *h,
                                       const int32_t *at)
{
  mt_tensor in[5] = {mt_rnn_view(&r->state, h), a->in[1], a->in[2], a->in[3], a->in[4]};
  mt_tensor out = mt_rnn_view(&r->gates, a->scratch);
  const mt_op_args args = {in, &out, at, NULL, 0, 5, 1, MT_FULLY_CONNECTED_N_ATTRS, 0};
  return at[0] == 0 ? mt_fully_connected_folded_s8(&args) : mt_fully_connected_s8(&args);
}

/* Time of step j and its column in y. */
static inline uint32_t mt_rnn_time(const mt_rnn *r, int32_t j)
{
  return (uint32_t)(r->reverse ? r->start - j : r->start + j);
}

static inline uint32_t mt_rnn_column(const mt_rnn *r, int32_t j)
{
  return (uint32_t)(r->reverse ? r->steps - 1 - j : j);
}

/* nn.RNN's steps (rnn_tanh with its table, rnn_relu with table NULL): per step s = fc(h) into
 * the scratch [B, H], then per row a = add(x[n, t], s[n]) (its clamp: relu's ReLU) in place,
 * h[n] = lut(a, table) or a, y[n, k] = h[n]. The attributes of both ops are in one order. */
static inline mt_status mt_rnn_run(const mt_op_args *args, const mt_tensor *table)
{
  mt_rnn r;
  if (!mt_rnn_init(&r, args, 1, MT_RNN_TANH_IN_H0)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  uint8_t *h = (uint8_t *)args->out[MT_RNN_TANH_OUT_H].data, *q = (uint8_t *)args->scratch;
  uint8_t *y = (uint8_t *)args->out[MT_RNN_TANH_OUT_Y].data;
  const uint8_t *x = (const uint8_t *)args->in[MT_RNN_TANH_IN_X].data;
  const size_t hb = (size_t)r.hidden * r.e;
  memcpy(h, args->in[MT_RNN_TANH_IN_H0].data, r.b * hb);
  for (int32_t j = 0; j < r.steps; j++) {
    const uint32_t t = mt_rnn_time(&r, j), k = mt_rnn_column(&r, j);
    MT_RNN_TRY(mt_rnn_product(&r, args, h, args->attrs + MT_RNN_TANH_IN_ZP));
    for (uint32_t n = 0; n < r.b; n++) {
      uint8_t *a = q + n * hb, *hn = h + n * hb;
      MT_RNN_TRY(mt_rnn_add(&r, r.hidden, x + ((size_t)n * r.t + t) * hb, a, table ? a : hn,
                            args->attrs + MT_RNN_TANH_X_A_ZP, MT_ADD_N_ATTRS));
      if (table != NULL) {
        MT_RNN_TRY(mt_rnn_lut(&r, a, table, hn));
      }
      memcpy(y + ((size_t)n * r.steps + k) * hb, hn, hb);
    }
  }
  return MT_STATUS_OK;
}

#endif /* MT_RECURRENT_H */
