/*
 * mt_matmul_s16.c - y = a @ b of two int16 activations (a16w8, docs/numerics.md section 6):
 *     y[.., m, n] = clamp(rq(sum_k a[.., m, k] * b[.., k, n], mult, shift), act_min, act_max)
 * zero points 0, the sum in int64 (|acc| <= K * 2^30 within int48: K <= 131,071), a 16-bit
 * multiplier and an int16 y: the int16 MAC ops' output stage (mt_out16, mt_mac16.h).
 * mt_matmul_s8 calls it for int16 operands (a weak reference: linked only when a program has an
 * int16 matmul). b^T is b itself when transpose_b, else one batch of b is transposed into the
 * scratch (2 K N bytes) first; each output row is the row a[m, :] against MM16_NR rows of b^T:
 *   MVE: VMLALVA.S16 (int16 x int16 into a 64-bit accumulator), two rows per pass of a
 *        tail-predicated loop, eight products per instruction;
 *   DSP: SMLALD on halfword pairs (two products per instruction);
 *   C:   int64 sums of int32 products (|a * b| <= 2^30), element by element (Armv6-M safe).
 */
#include "mt_mac16.h"
#include "mt_matmul.h"

#define MM16_NR    4 /* rows of b^T per pass over a row of a */
#define MM16_MAX_K 131071 /* K * 2^30 fits int48 */

mt_status mt_matmul_s16(const mt_op_args *args) MT_WEAK16;

#if MT_MVE
/* a0 += sum x[k] * w0[k], a1 += sum x[k] * w1[k] (k < n, n > 0): five instructions per eight
 * elements (three VLDRH, two VMLALVA) in a tail-predicated loop. */
static inline void mm16_dot2_mve(const int16_t *x, const int16_t *w0, const int16_t *w1, uint32_t n,
                                 int64_t *a0, int64_t *a1)
{
  int64_t s0 = *a0, s1 = *a1;
  /* clang-format off */
  __asm__ volatile("   dlstp.16 lr, %[n]\n"
                   "1: vldrh.s16 q0, [%[x]], #16\n"
                   "   vldrh.s16 q1, [%[w0]], #16\n"
                   "   vldrh.s16 q2, [%[w1]], #16\n"
                   "   vmlalva.s16 %Q[s0], %R[s0], q0, q1\n"
                   "   vmlalva.s16 %Q[s1], %R[s1], q0, q2\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [w0] "+r"(w0), [w1] "+r"(w1), [s0] "+r"(s0), [s1] "+r"(s1)
                   : [n] "r"(n)
                   : "q0", "q1", "q2", "lr", "memory");
  /* clang-format on */
  *a0 = s0;
  *a1 = s1;
}
#endif /* MT_MVE */

/* acc[r] = sum_{k < n} x[k] * w[r * n + k] for r < nr (1 <= nr <= MM16_NR). */
static MT_NOINLINE void mm16_dot_rows(const int16_t *x, const int16_t *w, uint32_t n, int32_t nr,
                                      int64_t *acc)
{
  uint32_t k = 0;
  for (int32_t r = 0; r < nr; r++) {
    acc[r] = 0;
  }
#if MT_MVE
  for (int32_t r = 0; n > 0 && r < nr; r += 2) { /* an odd last row is paired with itself */
    int64_t spare = 0;
    const int16_t *w0 = w + (size_t)r * n, *w1 = r + 1 < nr ? w0 + n : w0;
    mm16_dot2_mve(x, w0, w1, n, &acc[r], r + 1 < nr ? &acc[r + 1] : &spare);
  }
  k = n;
#elif MT_DSP /* !MT_MVE */
  for (; k + 2 <= n; k += 2) {
    uint32_t x01;
    __builtin_memcpy(&x01, x + k, 4);
    for (int32_t r = 0; r < nr; r++) {
      uint32_t w01;
      __builtin_memcpy(&w01, w + (size_t)r * n + k, 4);
      acc[r] = __smlald((int32_t)x01, (int32_t)w01, acc[r]);
    }
  }
#endif /* MT_MVE / MT_DSP */
  for (; k < n; k++) { /* the C path, and the DSP path's odd last element */
    for (int32_t r = 0; r < nr; r++) {
      acc[r] += (int32_t)x[k] * w[(size_t)r * n + k];
    }
  }
}

/* bt = b^T: b (K, N) -> bt (N, K), element by element. */
static void mm16_transpose(const int16_t *b, int16_t *bt, uint32_t k, uint32_t n)
{
  for (uint32_t c = 0; c < n; c++, bt += k) {
    const int16_t *col = b + c;
    for (uint32_t i = 0; i < k; i++, col += n) {
      bt[i] = *col;
    }
  }
}

/* The operands fit (mt_matmul.h: shapes, K, scratch for b^T) and the attributes are in section
 * 6's domain. */
static int mm16_args_ok(const mt_op_args *args, uint32_t *m, uint32_t *n, uint32_t *k)
{
  if (!mt_matmul_shapes_ok(args, MT_DTYPE_INT16, 2, MM16_MAX_K, m, n, k)) {
    return 0;
  }
  const int32_t *at = args->attrs;
  const int32_t mult = at[MT_MATMUL_MULT], shift = at[MT_MATMUL_SHIFT];
  const int32_t lo = at[MT_MATMUL_ACT_MIN], hi = at[MT_MATMUL_ACT_MAX];
  if (at[MT_MATMUL_A_ZP] != 0 || at[MT_MATMUL_B_ZP] != 0 || at[MT_MATMUL_OUT_ZP] != 0 ||
      lo < -MT_S16_MAX || lo > hi || hi > MT_S16_MAX || mult < 0 || mult > MT_S16_MAX ||
      shift < MT_MIN_SHIFT || shift > MT_MAX_SHIFT) {
    return 0;
  }
  const int64_t bound = (int64_t)*k << 30, half = (int64_t)1 << (shift - 1); /* < 2^47 */
  const int64_t top = (bound * mult + half) >> shift, bot = (-bound * mult + half) >> shift;
  return top <= INT32_MAX && bot >= INT32_MIN;
}

/* One batch: every row of a against the rows of bt, MM16_NR at a time. */
static void mm16_run(const int16_t *a, const int16_t *bt, int16_t *y, uint32_t m, uint32_t n,
                     uint32_t k, const int32_t *at)
{
  int64_t acc[MM16_NR];
  const int32_t mult = at[MT_MATMUL_MULT], shift = at[MT_MATMUL_SHIFT];
  const int32_t lo = at[MT_MATMUL_ACT_MIN], hi = at[MT_MATMUL_ACT_MAX];
  for (uint32_t r = 0; r < m; r++, a += k, y += n) {
    for (uint32_t o = 0; o < n; o += MM16_NR) {
      const int32_t nr = n - o < MM16_NR ? (int32_t)(n - o) : MM16_NR;
      mm16_dot_rows(a, bt + (size_t)o * k, k, nr, acc);
      for (int32_t j = 0; j < nr; j++) { /* within int48 and int32: checked above */
        (void)mt_out16(acc[j], mult, shift, lo, hi, y + o + j);
      }
    }
  }
}

// a: (.., M, K) int16; b: (.., K, N) int16, or (.., N, K) with transpose_b -> y: (.., M, N) int16
mt_status mt_matmul_s16(const mt_op_args *args)
{
  uint32_t m, n, k;
  if (!mm16_args_ok(args, &m, &n, &k)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_MATMUL_IN_A], *bt_ = &args->in[MT_MATMUL_IN_B];
  const mt_tensor *yt = &args->out[MT_MATMUL_OUT_Y];
  const int tb = args->attrs[MT_MATMUL_TRANSPOSE_B] != 0;
  const uint8_t r = yt->rec->rank;
  uint32_t batches = 1;
  for (uint8_t i = 0; i + 2 < r; i++) {
    batches *= yt->rec->shape[i];
  }
  if (mt_numel(yt) == 0) {
    return MT_STATUS_OK;
  }
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
    const int16_t *a = (const int16_t *)at_->data + (size_t)oa * m * k;
    const int16_t *b = (const int16_t *)bt_->data + (size_t)ob * k * n;
    if (!tb && ob != done) {
      mm16_transpose(b, (int16_t *)args->scratch, k, n);
      done = ob;
    }
    mm16_run(a, tb ? b : (const int16_t *)args->scratch, (int16_t *)yt->data + (size_t)q * m * n, m,
             n, k, args->attrs);
  }
  return MT_STATUS_OK;
}
