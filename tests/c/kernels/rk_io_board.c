/* rk_io_board.c - run_kernel's platform layer on QEMU boards: semihosting files and console,
 * one static arena (RK_ARENA_BYTES) handed out 16-aligned and reset between cases. */
#include <stddef.h>

#include "rk_io.h"
#include "semihost.h"

#ifndef RK_ARENA_BYTES
#define RK_ARENA_BYTES (256u * 1024u)
#endif

static uint8_t rk_arena[RK_ARENA_BYTES] __attribute__((aligned(16)));
static uint32_t rk_used;

int32_t rk_open(const char *path)
{
  return mt_sh_open(path, MT_SH_MODE_RB);
}

int32_t rk_read(int32_t fd, void *buf, uint32_t n)
{
  uint32_t done = 0;
  while (done < n) {
    int32_t got = mt_sh_read(fd, (uint8_t *)buf + done, n - done);
    if (got < 0) {
      return -1;
    }
    if (got == 0) {
      break;
    }
    done += (uint32_t)got;
  }
  return (int32_t)done;
}

void rk_close(int32_t fd)
{
  (void)mt_sh_close(fd);
}

void rk_print(const char *s)
{
  mt_sh_write0(s);
}

void *rk_alloc(uint32_t n)
{
  const uint32_t size = (n + 15u) & ~15u;
  if (size < n || size > RK_ARENA_BYTES - rk_used) {
    return NULL;
  }
  void *p = &rk_arena[rk_used];
  rk_used += size;
  return p;
}

void rk_release_all(void)
{
  rk_used = 0;
}
