/* unaligned.c - mcutorch board test: a word load from an odd address.
 *
 * Armv6-M and Armv8-M Baseline builds must fault here (start-up sets
 * CCR.UNALIGN_TRP, as the real cores always trap): the fault handler prints
 * "mt_fault: HardFault ..." and exits with status 243.  Armv7-M and later
 * builds load the word and exit 0.
 */
#include "board.h"

static uint8_t mt_bytes[8] __attribute__((aligned(4))) = {1, 2, 3, 4, 5, 6, 7, 8};

int main(void)
{
  /* Hide the address from the compiler (it would otherwise see the
   * misalignment and use byte loads), and load through a volatile pointer:
   * exactly one 32-bit LDR. */
  uintptr_t addr = (uintptr_t)mt_bytes + 1u;
  __asm__ volatile("" : "+r"(addr));
  volatile uint32_t *p = (volatile uint32_t *)addr;
  mt_sh_write0("unaligned: loading\n");
  uint32_t v = *p;
  mt_sh_write0("unaligned: no fault, value ");
  mt_print_hex32(v);
  mt_sh_write0("\n");
  return 0;
}
