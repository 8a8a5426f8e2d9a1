/* count_loop.c - mcutorch board test: a loop of known instruction count.
 *
 * argv[1] = N (decimal).  Runs a two-instruction loop (subs; bne) N times
 * between mt_counter_start() and mt_counter_read() and prints
 *   mt_ticks empty <t0>   an empty measured region (counter overhead)
 *   mt_ticks <t>          the loop: 2*N instructions + the same overhead
 * so the host can check its ticks -> instructions factor for the board.
 */
#include "board.h"

static uint32_t parse_u32(const char *s)
{
  uint32_t v = 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10u + (uint32_t)(*s++ - '0');
  }
  return v;
}

/* Exactly 2 instructions per iteration; Thumb-1 encodings, so also Armv6-M. */
static void __attribute__((noinline)) mt_spin(uint32_t n)
{
  /* clang-format off */
  __asm__ volatile(".syntax unified\n"
                   "1:\n\t"
                   "subs %0, %0, #1\n\t"
                   "bne 1b"
                   : "+l"(n)
                   :
                   : "cc");
  /* clang-format on */
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    mt_sh_write0("usage: count_loop N\n");
    return 2;
  }
  uint32_t n = parse_u32(argv[1]);

  mt_counter_start();
  uint64_t empty = mt_counter_read();
  mt_counter_report("empty", empty);

  mt_counter_start();
  mt_spin(n);
  uint64_t t = mt_counter_read();
  mt_counter_report(0, t);
  return 0;
}
