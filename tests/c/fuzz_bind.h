/* fuzz_bind.h - bind a loaded model to heap blocks of exactly the sizes it asks for, so that
 * AddressSanitizer sees a byte too far: the state, then one arena per region, aligned as the
 * region asks. The runtime refusing either is a harness bug: abort. */
#ifndef FUZZ_BIND_H
#define FUZZ_BIND_H

#include <stdlib.h>

#include "mcutorch.h"

static void fuzz_bind(mt_model *m, void **state, void **arenas, uint32_t n)
{
  uint32_t r;
  *state = malloc(mt_state_size(m));
  if (*state == NULL || mt_bind_state(m, *state, mt_state_size(m)) != MT_STATUS_OK) {
    abort();
  }
  for (r = 0; r < n; r++) {
    const mt_region_t *info = mt_region(m, r);
    size_t align = info->alignment < sizeof(void *) ? sizeof(void *) : info->alignment;
    if (posix_memalign(&arenas[r], align, info->size != 0 ? info->size : 1) != 0 ||
        mt_bind_arena(m, r, arenas[r], info->size) != MT_STATUS_OK) {
      abort();
    }
  }
}

#endif /* FUZZ_BIND_H */
