/* counter.c - SysTick-based tick counter for mcutorch board firmware.
 *
 * See counter.h.  SysTick reloads every 2^24 ticks; each wrap raises the
 * SysTick exception, which counts the periods in software.
 */
#include "counter.h"
#include "board.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u) /* control and status */
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u) /* reload value       */
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u) /* current value      */

#define CSR_ENABLE    (1u << 0)
#define CSR_TICKINT   (1u << 1)
#define CSR_CLKSOURCE (1u << 2) /* 1 = processor clock */

/* Ticks per period - 1; the maximum by default.  A smaller value (built with
 * -DMT_COUNTER_RELOAD=N) only serves to test the 64-bit extension. */
#ifndef MT_COUNTER_RELOAD
#define MT_COUNTER_RELOAD 0x00FFFFFFu
#endif
#define RELOAD ((uint32_t)(MT_COUNTER_RELOAD))

static volatile uint32_t mt_wraps; /* completed periods of RELOAD + 1 ticks */

void mt_systick_handler(void)
{
  mt_wraps++;
}

void mt_counter_start(void)
{
  SYST_CSR = 0;
  SYST_RVR = RELOAD;
  SYST_CVR = 0; /* any write clears the counter to 0; it reloads on the next tick */
  mt_wraps = 0;
  SYST_CSR = CSR_CLKSOURCE | CSR_TICKINT | CSR_ENABLE;
}

uint64_t mt_counter_read(void)
{
  uint32_t hi, val;
  /* Re-read if a wrap was counted between the two reads. */
  do {
    hi = mt_wraps;
    val = SYST_CVR;
  } while (hi != mt_wraps);
  /* After the clear the counter reads 0, then RELOAD, RELOAD-1, ..., 1, 0:
   * the wrap to 0 ends a period (and counts in mt_wraps). */
  uint32_t in_period = val == 0 ? 0 : RELOAD + 1u - val;
  return (uint64_t)hi * (RELOAD + 1ull) + in_period;
}

void mt_counter_report(const char *label, uint64_t ticks)
{
  mt_console_write("mt_ticks ");
  if (label != 0) {
    mt_console_write(label);
    mt_console_write(" ");
  }
  mt_print_u64(ticks);
  mt_console_write("\n");
}
