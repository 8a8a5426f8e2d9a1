/* mt_run_host_short_arena.c - the host runner (mt_run_host.c) with every arena one byte short
 * of what the program asks for: a faulty port layer, so that a real run ends in a real
 * AddressSanitizer report (tests/py/test_inputs.py checks how crt.run_host names it). Build it
 * in place of mt_run_host.c. */
#define mt_run_arena mt_run_arena_exact
#include "mt_run_host.c"
#undef mt_run_arena

void *mt_run_arena(uint32_t region, const char *name, size_t size, size_t alignment);

void *mt_run_arena(uint32_t region, const char *name, size_t size, size_t alignment)
{
  return mt_run_arena_exact(region, name, size > 1 ? size - 1 : size, alignment);
}
