/*
 * mt_matmul_s8.c - y = a @ b of two int8 activations, each with its own zero point, one
 * (mult, shift) for the whole output:
 *     y[.., m, n] = clamp(rq(sum_k (a[.., m, k] - a_zp) * (b[.., k, n] - b_zp)) + out_zp)
 * a, b, y have one rank (2..6); each batch dim of a or b is y's or 1 (numpy broadcasting).
 *
 * Every output row is fully_connected's: the row a[m, :] against the N rows of b^T, four rows
 * at a time (mt_dot_rows_s8: MVE VMLADAVA, DSP SMLAD, C; mt_kernel_mac.h). b^T is b itself when
 * transpose_b (b stored [.., N, K], e.g. the K of attention's Q @ K^T), else one batch of b is
 * transposed into the scratch (K * N bytes) first. The zero points cost nothing per MAC:
 *     acc = sum a*b - a_zp * sum_k b[k, n] - b_zp * sum_k a[m, k] + K * a_zp * b_zp
 * exactly, on 32 bits (wrapping; |acc| <= K * 255 * 255 fits int32 on the domain, which both
 * program readers check at load and this kernel again): the b column sums once per chunk of
 * MM_CHUNK outputs, the a row sum once per row and chunk.
 */
#include "mt_kernel_mac.h"
#include "mt_matmul.h"
#include "mt_kernels.h"

mt_status mt_matmul_s16(const mt_op_args *args) MT_WEAK16; /* int16 a and b: mt_matmul_s16.c */

#define MM_CHUNK 32 /* outputs whose accumulators are kept (5 x 128 B of stack) */
#define MM_MAX_K 33025 /* K * 255 * 255 fits int32 */

typedef struct {
  const int8_t *a, *bt; /* a: (M, K) of one batch; bt: (N, K), b^T of that batch */
  int8_t *y; /* (M, N) */
  uint32_t m, n, k;
  int32_t a_zp, b_zp;
} mm_batch;

/* One batch: y's outputs [0, N) in chunks, every row against the chunk's rows of b^T. */
static void mm_run(const mm_batch *p, const mt_out_stage *proto)
{
  uint32_t base[MM_CHUNK], init[MM_CHUNK], acc[MM_CHUNK];
  const uint32_t k = p->k, kzz = k * (uint32_t)p->a_zp * (uint32_t)p->b_zp;
  for (uint32_t o = 0; o < p->n; o += MM_CHUNK) {
    const int32_t nc = p->n - o < MM_CHUNK ? (int32_t)(p->n - o) : MM_CHUNK;
    const int8_t *w = p->bt + (size_t)o * k;
    for (int32_t j = 0; j < nc; j++) {
      base[j] = 0;
    }
    mt_wsum_rows_s8(w, k, k, nc, base);
    for (int32_t j = 0; j < nc; j++) { /* K a_zp b_zp - a_zp sum_k b[k, n] */
      base[j] = kzz - (uint32_t)p->a_zp * base[j];
    }
    for (uint32_t r = 0; r < p->m; r++) {
      const int8_t *row = p->a + (size_t)r * k;
      uint32_t rs = 0;
      mt_wsum_rows_s8(row, k, k, 1, &rs);
      const uint32_t off = (uint32_t)p->b_zp * rs;
      for (int32_t j = 0; j < nc; j++) {
        init[j] = base[j] - off;
      }
      mt_out_stage out = *proto;
      out.y = p->y + (size_t)r * p->n + o;
      mt_dot_rows_s8(row, w, k, k, nc, init, acc, &out);
    }
  }
}

/* bt = b^T: b (K, N) -> bt (N, K), byte by byte (K * N is small next to the M * K * N MACs). */
static void mm_transpose(const int8_t *b, int8_t *bt, uint32_t k, uint32_t n)
{
  for (uint32_t c = 0; c < n; c++, bt += k) {
    const int8_t *col = b + c;
    for (uint32_t i = 0; i < k; i++, col += n) {
      bt[i] = *col;
    }
  }
}

/* The operands fit (mt_matmul.h: shapes, K, scratch for b^T) and the attributes are in the
 * domain. */
static int mm_args_ok(const mt_op_args *args, uint32_t *m, uint32_t *n, uint32_t *k)
{
  if (!mt_matmul_shapes_ok(args, MT_DTYPE_INT8, 1, MM_MAX_K, m, n, k)) {
    return 0;
  }
  const int32_t *at = args->attrs;
  const int64_t bound = (int64_t)*k * 255 * 255;
  return mt_zp_ok(at[MT_MATMUL_A_ZP]) && mt_zp_ok(at[MT_MATMUL_B_ZP]) &&
         mt_zp_ok(at[MT_MATMUL_OUT_ZP]) &&
         mt_act_ok(at[MT_MATMUL_ACT_MIN], at[MT_MATMUL_ACT_MAX]) &&
         mt_rq_range_ok((int32_t)-bound, (int32_t)bound, at[MT_MATMUL_MULT], at[MT_MATMUL_SHIFT]);
}

// a: (.., M, K) int8; b: (.., K, N) int8, or (.., N, K) with transpose_b -> y: (.., M, N) int8
mt_status mt_matmul_s8(const mt_op_args *args)
{
  uint32_t m, n, k;
  if (mt_args_ok(args, MT_MATMUL_N_INPUTS, MT_MATMUL_N_OUTPUTS, MT_MATMUL_N_ATTRS) &&
      args->in[MT_MATMUL_IN_A].rec->dtype == MT_DTYPE_INT16) {
    return mt_matmul_s16 != NULL ? mt_matmul_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  if (!mm_args_ok(args, &m, &n, &k)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_MATMUL_IN_A], *bt_ = &args->in[MT_MATMUL_IN_B];
  const mt_tensor *yt = &args->out[MT_MATMUL_OUT_Y];
  const int32_t *at = args->attrs;
  const int tb = at[MT_MATMUL_TRANSPOSE_B] != 0;
  int32_t mult[MM_CHUNK], shift[MM_CHUNK];
  for (int32_t j = 0; j < MM_CHUNK; j++) { /* one scale for every output (the dot loops' table) */
    mult[j] = at[MT_MATMUL_MULT];
    shift[j] = at[MT_MATMUL_SHIFT];
  }
  const mt_out_stage proto = {
      mult, shift, at[MT_MATMUL_OUT_ZP], at[MT_MATMUL_ACT_MIN], at[MT_MATMUL_ACT_MAX], NULL, NULL};
  const uint8_t r = yt->rec->rank;
  uint32_t batches = 1;
  for (uint8_t i = 0; i + 2 < r; i++) {
    batches *= yt->rec->shape[i];
  }
  if (mt_numel(yt) == 0) {
    return MT_STATUS_OK;
  }
  mm_batch p = {NULL, NULL, NULL, m, n, k, at[MT_MATMUL_A_ZP], at[MT_MATMUL_B_ZP]};
  uint32_t done = 0xFFFFFFFFu; /* the batch of b in the scratch (a broadcast b: only once) */
  for (uint32_t q = 0; q < batches; q++) {
    uint32_t rest = q, oa = 0, ob = 0, sa = 1, sb = 1; /* q's batch offsets of a and b */
    for (uint8_t i = (uint8_t)(r - 2); i-- > 0;) {
      const uint32_t d = yt->rec->shape[i], c = rest % d;
      rest /= d;
      oa += (at_->rec->shape[i] == 1 ? 0 : c) * sa;
      ob += (bt_->rec->shape[i] == 1 ? 0 : c) * sb;
      sa *= at_->rec->shape[i];
      sb *= bt_->rec->shape[i];
    }
    p.a = (const int8_t *)at_->data + (size_t)oa * m * k;
    p.bt = (const int8_t *)bt_->data + (size_t)ob * k * n;
    p.y = (int8_t *)yt->data + (size_t)q * m * n;
    if (!tb && ob != done) {
      mm_transpose(p.bt, (int8_t *)args->scratch, k, n);
      done = ob;
    }
    if (!tb) {
      p.bt = (const int8_t *)args->scratch;
    }
    mm_run(&p, &proto);
  }
  return MT_STATUS_OK;
}
