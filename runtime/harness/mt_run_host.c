/* mt_run_host.c - mt_run.h on a POSIX host: stdio files, heap buffers of exactly the requested
 * size (so AddressSanitizer catches a kernel or the runtime stepping outside an arena, the
 * state or the program), no instruction counter. */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>

#include "mt_run.h"

#define MT_HOST_MAX_BUFFERS 64

static void *mt_host_buffers[MT_HOST_MAX_BUFFERS];
static int mt_host_n_buffers;
static void *mt_host_program;

static void *mt_host_alloc(size_t size, size_t alignment)
{
  void *p = NULL;
  if (mt_host_n_buffers == MT_HOST_MAX_BUFFERS ||
      posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment,
                     size != 0 ? size : 1) != 0) {
    return NULL;
  }
  mt_host_buffers[mt_host_n_buffers++] = p;
  return p;
}

static long mt_host_file_size(FILE *f)
{
  long n;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    return -1;
  }
  return n;
}

void *mt_run_read_program(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  long n = f != NULL ? mt_host_file_size(f) : -1;
  free(mt_host_program);
  mt_host_program = NULL;
  if (n >= 0 && posix_memalign(&mt_host_program, 16, n != 0 ? (size_t)n : 1) == 0 &&
      fread(mt_host_program, 1, (size_t)n, f) == (size_t)n) {
    *size = (size_t)n;
  } else {
    free(mt_host_program);
    mt_host_program = NULL;
  }
  if (f != NULL) {
    fclose(f);
  }
  return mt_host_program;
}

int mt_run_read(const char *path, void *buf, size_t size, uint32_t index, uint32_t count)
{
  FILE *f = fopen(path, "rb");
  long n = f != NULL ? mt_host_file_size(f) : -1;
  int ok = n >= 0 && index < count && (size_t)n % count == 0 && (size_t)n / count == size &&
           (size == 0 ||
            (fseek(f, (long)(index * size), SEEK_SET) == 0 && fread(buf, 1, size, f) == size));
  if (f != NULL) {
    fclose(f);
  }
  return ok ? 0 : -1;
}

int mt_run_write(const char *path, const void *buf, size_t size, uint32_t index)
{
  FILE *f = fopen(path, index == 0 ? "wb" : "ab");
  int ok = f != NULL && (size == 0 || fwrite(buf, 1, size, f) == size);
  if (f != NULL && fclose(f) != 0) {
    ok = 0;
  }
  return ok ? 0 : -1;
}

void *mt_run_state(size_t size)
{
  return mt_host_alloc(size, sizeof(void *));
}

void *mt_run_arena(uint32_t region, const char *name, size_t size, size_t alignment)
{
  (void)region;
  (void)name;
  return mt_host_alloc(size, alignment);
}

void *mt_run_persistent(size_t size)
{
  return mt_host_alloc(size, 16);
}

void mt_run_release(void)
{
  while (mt_host_n_buffers > 0) {
    free(mt_host_buffers[--mt_host_n_buffers]);
  }
  free(mt_host_program);
  mt_host_program = NULL;
}

void mt_run_print(const char *text)
{
  fputs(text, stdout);
  fflush(stdout);
}

void mt_run_counter_start(void) {}

void mt_run_counter_stop(void) {}
