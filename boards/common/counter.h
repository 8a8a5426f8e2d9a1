/* counter.h - instruction counting with SysTick for mcutorch board firmware.
 *
 * SysTick runs from the CPU clock and its 24-bit down-counter is extended to
 * 64 bits in the SysTick interrupt.  Under QEMU with `-icount shift=0` every
 * guest instruction advances virtual time by exactly 1 ns, so a tick count
 * converts to an instruction count with a fixed per-board factor
 * (1e9 / CPU clock in Hz); mcutorch.boards does that conversion on the host.
 * On real silicon the same ticks are CPU cycles.
 *
 *     mt_counter_start();
 *     work();
 *     mt_counter_report("work", mt_counter_read());
 *
 * prints the line "mt_ticks work <n>", which mcutorch.boards.run_elf parses.
 */
#ifndef MT_COUNTER_H
#define MT_COUNTER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* (Re)start the counter from zero; enables SysTick and its interrupt. */
void mt_counter_start(void);
/* Ticks since mt_counter_start().  Needs interrupts enabled to go past
 * 2^24 ticks. */
uint64_t mt_counter_read(void);
/* Print "mt_ticks <label> <ticks>\n" (label may be NULL: "mt_ticks <ticks>"). */
void mt_counter_report(const char *label, uint64_t ticks);

/* SysTick exception handler (installed in the vector table by startup.c). */
void mt_systick_handler(void);

#ifdef __cplusplus
}
#endif

#endif /* MT_COUNTER_H */
