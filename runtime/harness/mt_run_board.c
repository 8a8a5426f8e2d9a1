/* mt_run_board.c - mt_run.h on board firmware (boards/common): semihosting files and console,
 * SysTick instruction counts, static buffers sized at build time.
 *
 * Build defines (mcutorch.crt.firmware_defines(program) computes them from a program):
 *   MT_PROGRAM_SIZE        bytes of the program buffer (default 256 KiB)
 *   MT_PROGRAM_REGION      board region of the program buffer, e.g. "DDR" (default: .bss)
 *   MT_STATE_SIZE          bytes of the state buffer (default 4 KiB)
 *   MT_ARENA<k>_SIZE       bytes of arena k, k = 0..3 (a program region without one: refused)
 *   MT_ARENA<k>_REGION     board region holding arena k, e.g. "SRAM" (default: .bss)
 *   MT_ARENA_ALIGN         alignment of every arena (default 16; the largest region alignment)
 *   MT_PERSIST_SIZE        bytes of the persistent buffer of a stateful program (default 0)
 * With MT_PROFILE, each op's instructions are printed after each inference as
 * "mt_ticks op<i> <n>". */
#include "board.h"
#include "mt_port.h"
#include "mt_run.h"

#ifndef MT_PROGRAM_SIZE
#define MT_PROGRAM_SIZE (256 * 1024)
#endif
#ifndef MT_STATE_SIZE
#define MT_STATE_SIZE 4096
#endif
#ifndef MT_ARENA_ALIGN
#define MT_ARENA_ALIGN 16
#endif

#define MT_ALIGNED(n) __attribute__((aligned(n)))
#define MT_IN(region) MT_REGION_BSS(region)

#ifdef MT_PROGRAM_REGION
static uint8_t mt_program[MT_PROGRAM_SIZE] MT_IN(MT_PROGRAM_REGION);
#else
static uint8_t mt_program[MT_PROGRAM_SIZE] MT_ALIGNED(16);
#endif
static void *mt_state[(MT_STATE_SIZE + sizeof(void *) - 1) / sizeof(void *)];

/* Arena k: a static array in region MT_ARENA<k>_REGION (a 1-byte dummy when the build has
 * none, which only a region of size 0 can use). */
#define MT_ARENA_NONE(k)                                                                           \
  static uint8_t mt_arena##k[1];                                                                   \
  enum { mt_arena##k##_size = 0 };
#define MT_ARENA_DEFINE(k, placement)                                                              \
  static uint8_t mt_arena##k[MT_ARENA##k##_SIZE] placement MT_ALIGNED(MT_ARENA_ALIGN);             \
  enum { mt_arena##k##_size = MT_ARENA##k##_SIZE };

#if !defined(MT_ARENA0_SIZE)
MT_ARENA_NONE(0)
#elif defined(MT_ARENA0_REGION)
MT_ARENA_DEFINE(0, MT_IN(MT_ARENA0_REGION))
#else
MT_ARENA_DEFINE(0, )
#endif
#if !defined(MT_ARENA1_SIZE)
MT_ARENA_NONE(1)
#elif defined(MT_ARENA1_REGION)
MT_ARENA_DEFINE(1, MT_IN(MT_ARENA1_REGION))
#else
MT_ARENA_DEFINE(1, )
#endif
#if !defined(MT_ARENA2_SIZE)
MT_ARENA_NONE(2)
#elif defined(MT_ARENA2_REGION)
MT_ARENA_DEFINE(2, MT_IN(MT_ARENA2_REGION))
#else
MT_ARENA_DEFINE(2, )
#endif
#if !defined(MT_ARENA3_SIZE)
MT_ARENA_NONE(3)
#elif defined(MT_ARENA3_REGION)
MT_ARENA_DEFINE(3, MT_IN(MT_ARENA3_REGION))
#else
MT_ARENA_DEFINE(3, )
#endif

void *mt_run_read_program(const char *path, size_t *size)
{
  int32_t fd = mt_sh_open(path, MT_SH_MODE_RB);
  int32_t n = fd >= 0 ? mt_sh_flen(fd) : -1;
  int ok = n >= 0 && (uint32_t)n <= sizeof mt_program && mt_sh_read(fd, mt_program, (size_t)n) == n;
  if (fd >= 0) {
    mt_sh_close(fd);
  }
  if (n > (int32_t)sizeof mt_program) {
    mt_run_print("mt_run: program larger than MT_PROGRAM_SIZE\n");
  }
  *size = ok ? (size_t)n : 0;
  return ok ? mt_program : 0;
}

int mt_run_read(const char *path, void *buf, size_t size, uint32_t index, uint32_t count)
{
  int32_t fd = mt_sh_open(path, MT_SH_MODE_RB);
  int32_t n = fd >= 0 ? mt_sh_flen(fd) : -1;
  uint64_t total = (uint64_t)size * count;
  int ok = n >= 0 && (uint64_t)n == total && index < count &&
           (size == 0 || (mt_sh_seek(fd, (uint32_t)(index * size)) == 0 &&
                          mt_sh_read(fd, buf, size) == (int32_t)size));
  if (fd >= 0) {
    mt_sh_close(fd);
  }
  return ok ? 0 : -1;
}

int mt_run_write(const char *path, const void *buf, size_t size, uint32_t index)
{
  /* A later record: open for update and seek to the end. (Mode "ab" does not append under
   * QEMU 7.2's semihosting: each write lands at the start of the file.) */
  int32_t fd = mt_sh_open(path, index == 0 ? MT_SH_MODE_WB : MT_SH_MODE_RPB);
  int32_t n = fd >= 0 && index != 0 ? mt_sh_flen(fd) : 0;
  int ok = fd >= 0 && n >= 0 && (index == 0 || mt_sh_seek(fd, (uint32_t)n) == 0) &&
           (size == 0 || mt_sh_write(fd, buf, size) == 0);
  if (fd >= 0 && mt_sh_close(fd) != 0) {
    ok = 0;
  }
  return ok ? 0 : -1;
}

void *mt_run_state(size_t size)
{
  return size <= sizeof mt_state ? (void *)mt_state : 0;
}

void *mt_run_arena(uint32_t region, const char *name, size_t size, size_t alignment)
{
  static uint8_t *const arenas[4] = {mt_arena0, mt_arena1, mt_arena2, mt_arena3};
  static const size_t sizes[4] = {mt_arena0_size, mt_arena1_size, mt_arena2_size, mt_arena3_size};
  if (region >= 4 || size > sizes[region] || alignment > MT_ARENA_ALIGN) {
    mt_run_print("mt_run: the firmware has no arena that fits region ");
    mt_run_print(name);
    mt_run_print("\n");
    return 0;
  }
  return arenas[region];
}

/* The persistent buffer of a stateful program: MT_PERSIST_SIZE bytes in .bss (default none). */
#ifndef MT_PERSIST_SIZE
#define MT_PERSIST_SIZE 0
#endif
static uint8_t mt_persist[MT_PERSIST_SIZE > 0 ? MT_PERSIST_SIZE : 1] MT_ALIGNED(16);

void *mt_run_persistent(size_t size)
{
  return size <= MT_PERSIST_SIZE ? (void *)mt_persist : 0;
}

void mt_run_release(void) {}

void mt_run_print(const char *text)
{
  mt_sh_write0(text);
}

#ifdef MT_PROFILE
#ifndef MT_PROFILE_MAX_OPS
#define MT_PROFILE_MAX_OPS 512
#endif
static uint64_t mt_op_ticks[MT_PROFILE_MAX_OPS];
static uint64_t mt_op_started;

void mt_port_op_begin(uint32_t op)
{
  (void)op;
  mt_op_started = mt_counter_read();
}

void mt_port_op_end(uint32_t op)
{
  if (op < MT_PROFILE_MAX_OPS) {
    mt_op_ticks[op] += mt_counter_read() - mt_op_started;
  }
}

/* Each op's ticks of the inference that just ended (then zeroed for the next one). */
static void mt_report_ops(void)
{
  char label[32] = "op";
  uint32_t i;
  for (i = 0; i < MT_PROFILE_MAX_OPS; i++) {
    if (mt_op_ticks[i] != 0) {
      mt_fmt_u64(label + 2, i);
      mt_counter_report(label, mt_op_ticks[i]);
      mt_op_ticks[i] = 0;
    }
  }
}
#endif /* MT_PROFILE */

void mt_run_counter_start(void)
{
  mt_counter_start();
}

void mt_run_counter_stop(void)
{
  uint64_t ticks = mt_counter_read();
#ifdef MT_PROFILE
  mt_report_ops();
#endif
  mt_counter_report(0, ticks);
}
