/* uart.c - polled transmit on the board's CMSDK APB UART0 (see uart.h). */
#include "uart.h"

#include "semihost.h" /* mt_fmt_i32 (integer formatting only: no semihosting call) */

#ifndef MT_UART_BASE
#define MT_UART_BASE 0x40004000u /* mps2-an385/386/500 */
#endif
#ifndef MT_UART_BAUD_DIVISOR
#define MT_UART_BAUD_DIVISOR 217u /* 25 MHz / 115200 baud; QEMU needs >= 16 */
#endif

#define UART_REG(offset) (*(volatile uint32_t *)((uintptr_t)(MT_UART_BASE) + (offset)))
#define UART_DATA        UART_REG(0x00u)
#define UART_STATE       UART_REG(0x04u) /* bit 0: transmit buffer full */
#define UART_CTRL        UART_REG(0x08u) /* bit 0: transmit enable */
#define UART_BAUDDIV     UART_REG(0x10u)

#define STATE_TX_FULL 1u
#define CTRL_TX_EN    1u

void mt_uart_init(void)
{
  UART_BAUDDIV = MT_UART_BAUD_DIVISOR;
  UART_CTRL |= CTRL_TX_EN;
}

void mt_uart_write0(const char *s)
{
  if ((UART_CTRL & CTRL_TX_EN) == 0u) {
    mt_uart_init();
  }
  for (; *s != '\0'; s++) {
    while ((UART_STATE & STATE_TX_FULL) != 0u) {
    }
    UART_DATA = (uint8_t)*s;
  }
}

void mt_uart_halt(int32_t status)
{
  char buf[24];
  mt_uart_write0("mt_exit ");
  mt_uart_write0(mt_fmt_i32(buf, status));
  mt_uart_write0("\n");
  __asm__ volatile("cpsid i" ::: "memory");
  for (;;) {
    __asm__ volatile("wfi");
  }
}
