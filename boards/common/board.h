/* board.h - what mcutorch board firmware may use from boards/common.
 *
 * Including this gives the semihosting layer (host files, console, exit),
 * the SysTick instruction counter, the exit statuses the fault handlers use,
 * and section attributes that place data in a named memory region of the
 * board's linker script (boards/<board>/link.ld).
 *
 * startup.c calls `int main(int argc, char **argv)`; argv comes from the
 * semihosting command line (words separated by spaces, argv[0] = program),
 * and main's return value becomes the emulator's exit status (MT_STANDALONE
 * builds: argc is 0 and the status is printed on the UART).
 */
#ifndef MT_BOARD_H
#define MT_BOARD_H

#include "counter.h"
#include "semihost.h"
#include "uart.h"

/* The console and the end of main(): semihosting (QEMU's console and exit status, host files)
 * by default; with -DMT_STANDALONE the board's UART0 (uart.h), no semihosting call at all,
 * and main's return prints "mt_exit <status>" and halts: firmware for a board without a
 * debugger. */
#ifdef MT_STANDALONE
#define mt_console_write mt_uart_write0
#define mt_halt          mt_uart_halt
#else
#define mt_console_write mt_sh_write0
#define mt_halt          mt_sh_exit
#endif

/* A fault ends the program with status MT_EXIT_FAULT_BASE + exception number
 * after printing "mt_fault: <name> ..." on the console:
 * 242 NMI, 243 HardFault, 244 MemManage, 245 BusFault, 246 UsageFault,
 * 247 SecureFault, 251 SVCall, 252 DebugMonitor, 254 PendSV;
 * 248 means an interrupt (exception number >= 16) nothing handles. */
#define MT_EXIT_FAULT_BASE     240
#define MT_EXIT_UNEXPECTED_IRQ 248

/* Zero-size-on-disk data in region R (not zeroed at start-up), e.g.
 *     static int8_t arena[65536] MT_REGION_BSS("SRAM");
 * and initialised data placed directly in region R by the ELF loader. */
#define MT_REGION_BSS(R)  __attribute__((section(".mt_bss." R), aligned(16)))
#define MT_REGION_DATA(R) __attribute__((section(".mt_data." R), aligned(16)))

#endif /* MT_BOARD_H */
