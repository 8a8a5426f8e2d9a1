/* startup.c - shared Cortex-M start-up code for mcutorch board firmware.
 *
 * One file for every board and CPU (Armv6-M to Armv8.1-M):
 *   - the vector table (initial stack pointer, reset, faults, SysTick);
 *   - the reset handler: stack limit (Armv8-M Mainline), FPU/MVE enable,
 *     unaligned-access trapping for Armv6-M / Armv8-M Baseline builds,
 *     .data copy and .bss clear, argc/argv from the semihosting command line,
 *     then main(), whose return value becomes the exit status;
 *   - fault handlers that print the fault and exit with a distinct status
 *     (see board.h) instead of spinning, so an emulator run never hangs.
 * The symbols it uses come from the board's linker script.
 */
#include <stdint.h>

#include "board.h"

extern uint32_t __data_start__, __data_end__, __data_load__;
extern uint32_t __bss_start__, __bss_end__;
extern uint32_t __StackTop, __StackLimit;

int main(int argc, char **argv);

void mt_reset_handler(void) __attribute__((noreturn));
void mt_fault_entry(void);

/* System control block registers. */
#define SCB_ICSR  (*(volatile uint32_t *)0xE000ED04u)
#define SCB_VTOR  (*(volatile uint32_t *)0xE000ED08u)
#define SCB_CCR   (*(volatile uint32_t *)0xE000ED14u)
#define SCB_SHCSR (*(volatile uint32_t *)0xE000ED24u)
#define SCB_CFSR  (*(volatile uint32_t *)0xE000ED28u)
#define SCB_HFSR  (*(volatile uint32_t *)0xE000ED2Cu)
#define SCB_MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define SCB_BFAR  (*(volatile uint32_t *)0xE000ED38u)
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

#define CCR_UNALIGN_TRP (1u << 3)

#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
#define MT_BASELINE 1 /* no configurable faults, no CFSR, unaligned accesses fault */
#else
#define MT_BASELINE 0
#endif

/* Vector table: 16 system entries; no device interrupts are used. */
typedef void (*mt_vector)(void);
/* clang-format off */
__attribute__((section(".mt_vectors"), used)) static const mt_vector mt_vectors[16] = {
    (mt_vector)(uintptr_t)&__StackTop, /* 0  initial main stack pointer */
    mt_reset_handler,                  /* 1  Reset */
    mt_fault_entry,                    /* 2  NMI */
    mt_fault_entry,                    /* 3  HardFault */
    mt_fault_entry,                    /* 4  MemManage */
    mt_fault_entry,                    /* 5  BusFault */
    mt_fault_entry,                    /* 6  UsageFault */
    mt_fault_entry,                    /* 7  SecureFault */
    0, 0, 0,                           /* 8-10 reserved */
    mt_fault_entry,                    /* 11 SVCall */
    mt_fault_entry,                    /* 12 DebugMonitor */
    0,                                 /* 13 reserved */
    mt_fault_entry,                    /* 14 PendSV */
    mt_systick_handler,                /* 15 SysTick (instruction counter) */
};
/* clang-format on */

/* argv storage: the semihosting command line split at spaces. */
#ifndef MT_CMDLINE_SIZE
#define MT_CMDLINE_SIZE 256
#endif
#define MT_MAX_ARGS 16
static char *mt_argv[MT_MAX_ARGS + 1];

#ifdef MT_STANDALONE
static int mt_split_args(void)
{
  return 0; /* no host, so no command line */
}
#else
static char mt_cmdline[MT_CMDLINE_SIZE];

static int mt_split_args(void)
{
  int argc = 0;
  if (mt_sh_cmdline(mt_cmdline, sizeof mt_cmdline) < 0) {
    return 0;
  }
  char *p = mt_cmdline;
  while (*p != '\0' && argc < MT_MAX_ARGS) {
    while (*p == ' ') {
      *p++ = '\0';
    }
    if (*p == '\0') {
      break;
    }
    mt_argv[argc++] = p;
    while (*p != '\0' && *p != ' ') {
      p++;
    }
  }
  mt_argv[argc] = 0;
  return argc;
}
#endif /* MT_STANDALONE */

void mt_reset_handler(void)
{
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
  /* Stack overflow raises a UsageFault (STKOF) instead of corrupting .bss. */
  __asm__ volatile("msr msplim, %0" : : "r"(&__StackLimit));
#endif
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  /* Full access to CP10/CP11 (FPU and MVE) before any FP/MVE instruction. */
  SCB_CPACR |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#if MT_BASELINE
  /* Behave like the real core: word/halfword accesses must be aligned.
   * (An Armv6-M build run on a v7-M board would otherwise not fault.) */
  SCB_CCR |= CCR_UNALIGN_TRP;
#else
  SCB_VTOR = (uint32_t)(uintptr_t)mt_vectors;
  /* Report MemManage/BusFault/UsageFault as themselves, not as HardFault. */
  SCB_SHCSR |= (1u << 16) | (1u << 17) | (1u << 18);
#endif
  __asm__ volatile("dsb\n\tisb" ::: "memory");

  /* Initialised data from its load address in code memory, then zeros. */
  uint32_t *src = &__data_load__;
  for (uint32_t *dst = &__data_start__; dst < &__data_end__;) {
    *dst++ = *src++;
  }
  for (uint32_t *dst = &__bss_start__; dst < &__bss_end__;) {
    *dst++ = 0;
  }

  int argc = mt_split_args();
  mt_halt(main(argc, mt_argv));
}

/* Fault entry: find the stacked exception frame (MSP or PSP, from bit 2 of
 * EXC_RETURN in lr) and hand it to mt_fault_report.  Thumb-1 instructions
 * only, so it assembles for Armv6-M too. */
__attribute__((naked)) void mt_fault_entry(void)
{
  /* clang-format off */
  __asm__ volatile(
      "movs r0, #4\n\t"
      "mov  r1, lr\n\t"
      "tst  r0, r1\n\t"
      "beq  1f\n\t"
      "mrs  r0, psp\n\t"
      "b    2f\n"
      "1:\n\t"
      "mrs  r0, msp\n"
      "2:\n\t"
      "ldr  r2, =mt_fault_report\n\t"
      "bx   r2\n\t"
      ".ltorg\n");
  /* clang-format on */
}

static const char *const mt_exception_names[16] = {
    "Thread",       "Reset",       "NMI",      "HardFault", "MemManage", "BusFault",
    "UsageFault",   "SecureFault", "Reserved", "Reserved",  "Reserved",  "SVCall",
    "DebugMonitor", "Reserved",    "PendSV",   "SysTick",
};

static void mt_print_reg(const char *name, uint32_t v)
{
  mt_console_write(" ");
  mt_console_write(name);
  mt_console_write("=");
  mt_print_hex32(v);
}

/* frame: r0, r1, r2, r3, r12, lr, pc, xpsr as stacked on exception entry. */
__attribute__((used, noreturn)) void mt_fault_report(const uint32_t *frame)
{
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  ipsr &= 0x1FFu;

  mt_console_write("\nmt_fault: ");
  if (ipsr < 16) {
    mt_console_write(mt_exception_names[ipsr]);
  } else {
    mt_console_write("IRQ");
    mt_print_i32((int32_t)ipsr - 16);
  }
  mt_print_reg("pc", frame[6]);
  mt_print_reg("lr", frame[5]);
  mt_print_reg("xpsr", frame[7]);
#if !MT_BASELINE
  mt_print_reg("cfsr", SCB_CFSR);
  mt_print_reg("hfsr", SCB_HFSR);
  mt_print_reg("mmfar", SCB_MMFAR);
  mt_print_reg("bfar", SCB_BFAR);
#endif
  mt_console_write("\n");
  mt_halt(ipsr < 16 ? MT_EXIT_FAULT_BASE + (int32_t)ipsr : MT_EXIT_UNEXPECTED_IRQ);
}

/* newlib's libc may reference these when linked without crt0. */
void _init(void) {}
void _fini(void) {}
