/* uart.h - the board's UART0 for standalone mcutorch firmware (no debugger, no host files).
 *
 * Every board mcutorch knows has an Arm CMSDK APB UART as UART0; its base address comes from
 * mcutorch.device.boards.BOARDS (build_elf passes -DMT_UART_BASE=...). QEMU connects it to
 * `-serial`; on a real board it is the USB serial port. Output only: transmit, polled.
 *
 * In an MT_STANDALONE build board.h routes the console here and the end of main() to
 * mt_uart_halt, so firmware runs the same without semihosting (which needs a debugger).
 */
#ifndef MT_UART_H
#define MT_UART_H

#include <stdint.h>

/* Enable the transmitter (once; every write below does it when needed). */
void mt_uart_init(void);
/* Write a NUL-terminated string, waiting while the transmit buffer is full. */
void mt_uart_write0(const char *s);
/* Print "mt_exit <status>" and stop: interrupts off, wait for interrupt, forever. */
void mt_uart_halt(int32_t status) __attribute__((noreturn));

#endif /* MT_UART_H */
