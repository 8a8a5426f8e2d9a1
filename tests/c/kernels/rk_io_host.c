/* rk_io_host.c - run_kernel's platform layer on the host: stdio files, malloc'd buffers. */
#include <stdio.h>
#include <stdlib.h>

#include "rk_io.h"

#define RK_MAX_FILES   4
#define RK_MAX_BUFFERS 256

static FILE *rk_files[RK_MAX_FILES];
static void *rk_buffers[RK_MAX_BUFFERS];
static int rk_n_buffers;

int32_t rk_open(const char *path)
{
  for (int32_t fd = 0; fd < RK_MAX_FILES; fd++) {
    if (rk_files[fd] == NULL) {
      rk_files[fd] = fopen(path, "rb");
      return rk_files[fd] != NULL ? fd : -1;
    }
  }
  return -1;
}

int32_t rk_read(int32_t fd, void *buf, uint32_t n)
{
  size_t got = n > 0 ? fread(buf, 1, n, rk_files[fd]) : 0;
  return ferror(rk_files[fd]) ? -1 : (int32_t)got;
}

void rk_close(int32_t fd)
{
  fclose(rk_files[fd]);
  rk_files[fd] = NULL;
}

void rk_print(const char *s)
{
  fputs(s, stdout);
  fflush(stdout); /* nothing lost if a sanitizer stops the run */
}

void *rk_alloc(uint32_t n)
{
  if (rk_n_buffers == RK_MAX_BUFFERS) {
    return NULL;
  }
  void *p = malloc(n > 0 ? n : 1);
  if (p != NULL) {
    rk_buffers[rk_n_buffers++] = p;
  }
  return p;
}

void rk_release_all(void)
{
  while (rk_n_buffers > 0) {
    free(rk_buffers[--rk_n_buffers]);
  }
}
