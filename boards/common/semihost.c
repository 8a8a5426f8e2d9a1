/* semihost.c - minimal Arm semihosting layer for mcutorch board firmware.
 *
 * See semihost.h.  Operation numbers and argument blocks follow the Arm
 * "Semihosting for AArch32 and AArch64" specification.  On M-profile cores
 * the trap instruction is `bkpt 0xAB`.
 */
#include "board.h"

#define SYS_OPEN          0x01
#define SYS_CLOSE         0x02
#define SYS_WRITE0        0x04
#define SYS_WRITE         0x05
#define SYS_READ          0x06
#define SYS_SEEK          0x0A
#define SYS_FLEN          0x0C
#define SYS_GET_CMDLINE   0x15
#define SYS_EXIT          0x18
#define SYS_EXIT_EXTENDED 0x20

/* Reason code "application exit" (ADP_Stopped_ApplicationExit). */
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

int32_t mt_sh_call(int32_t op, const void *arg)
{
  register int32_t r0 __asm__("r0") = op;
  register const void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void mt_sh_write0(const char *s)
{
  mt_sh_call(SYS_WRITE0, s);
}

int32_t mt_sh_open(const char *path, int32_t mode)
{
  size_t len = 0;
  while (path[len] != '\0') {
    len++;
  }
  uint32_t block[3] = {(uint32_t)(uintptr_t)path, (uint32_t)mode, (uint32_t)len};
  return mt_sh_call(SYS_OPEN, block);
}

int32_t mt_sh_close(int32_t fd)
{
  uint32_t block[1] = {(uint32_t)fd};
  return mt_sh_call(SYS_CLOSE, block);
}

int32_t mt_sh_read(int32_t fd, void *buf, size_t n)
{
  uint32_t block[3] = {(uint32_t)fd, (uint32_t)(uintptr_t)buf, (uint32_t)n};
  /* SYS_READ returns the number of bytes NOT read. */
  int32_t left = mt_sh_call(SYS_READ, block);
  if (left < 0 || (size_t)left > n) {
    return -1;
  }
  return (int32_t)(n - (size_t)left);
}

int32_t mt_sh_write(int32_t fd, const void *buf, size_t n)
{
  uint32_t block[3] = {(uint32_t)fd, (uint32_t)(uintptr_t)buf, (uint32_t)n};
  /* SYS_WRITE returns the number of bytes NOT written. */
  return mt_sh_call(SYS_WRITE, block) == 0 ? 0 : -1;
}

int32_t mt_sh_seek(int32_t fd, uint32_t pos)
{
  uint32_t block[2] = {(uint32_t)fd, pos};
  return mt_sh_call(SYS_SEEK, block);
}

int32_t mt_sh_flen(int32_t fd)
{
  uint32_t block[1] = {(uint32_t)fd};
  return mt_sh_call(SYS_FLEN, block);
}

int32_t mt_sh_cmdline(char *buf, size_t n)
{
  uint32_t block[2] = {(uint32_t)(uintptr_t)buf, (uint32_t)n};
  if (n == 0 || mt_sh_call(SYS_GET_CMDLINE, block) != 0) {
    return -1;
  }
  return (int32_t)block[1]; /* the host updates the length */
}

void mt_sh_exit(int32_t status)
{
  uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
  mt_sh_call(SYS_EXIT_EXTENDED, block);
  /* Hosts without SYS_EXIT_EXTENDED: plain exit (status 0/1 only). */
  mt_sh_call(SYS_EXIT, (const void *)(uintptr_t)ADP_STOPPED_APPLICATION_EXIT);
  for (;;) {
  }
}

char *mt_fmt_u64(char *buf, uint64_t v)
{
  char tmp[21];
  int i = 0;
  do {
    /* 64-bit division by 10 without __aeabi_uldivmod: split in halves. */
    uint32_t hi = (uint32_t)(v >> 32), lo = (uint32_t)v;
    uint32_t qhi = hi / 10u, rhi = hi % 10u;
    /* (rhi * 2^32 + lo) / 10, done 16 bits at a time to stay in 32 bits. */
    uint32_t mid = (rhi << 16) | (lo >> 16);
    uint32_t qmid = mid / 10u, rmid = mid % 10u;
    uint32_t low = (rmid << 16) | (lo & 0xFFFFu);
    uint32_t qlow = low / 10u, rlow = low % 10u;
    tmp[i++] = (char)('0' + rlow);
    v = ((uint64_t)qhi << 32) | ((uint64_t)qmid << 16) | qlow;
  } while (v != 0);
  int j = 0;
  while (i > 0) {
    buf[j++] = tmp[--i];
  }
  buf[j] = '\0';
  return buf;
}

char *mt_fmt_i32(char *buf, int32_t v)
{
  if (v < 0) {
    buf[0] = '-';
    mt_fmt_u64(buf + 1, (uint64_t)(-(int64_t)v));
  } else {
    mt_fmt_u64(buf, (uint64_t)v);
  }
  return buf;
}

char *mt_fmt_hex32(char *buf, uint32_t v)
{
  static const char digits[] = "0123456789abcdef";
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < 8; i++) {
    buf[2 + i] = digits[(v >> (28 - 4 * i)) & 0xFu];
  }
  buf[10] = '\0';
  return buf;
}

void mt_print_u64(uint64_t v)
{
  char buf[24];
  mt_console_write(mt_fmt_u64(buf, v));
}

void mt_print_i32(int32_t v)
{
  char buf[24];
  mt_console_write(mt_fmt_i32(buf, v));
}

void mt_print_hex32(uint32_t v)
{
  char buf[12];
  mt_console_write(mt_fmt_hex32(buf, v));
}
