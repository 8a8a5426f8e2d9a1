/* mt_status.c - names of statuses: the load errors are schema.ERRORS of the Python reader
 * (tests/py/test_crt.py checks the two lists agree). Not needed by the interpreter: a build
 * with --gc-sections drops it when unused. */
#include "mcutorch.h"

const char *mt_status_name(int status)
{
  static const char *const load[] = {
      "ok",          "truncated",    "bad_magic",    "bad_version",    "bad_crc",    "bad_header",
      "bad_section", "bad_target",   "bad_region",   "bad_tensor",     "bad_offset", "bad_op",
      "bad_io",      "bad_delegate", "bad_metadata", "bad_persistent",
  };
  static const char *const run[] = {
      "bad_argument", "no_kernel", "bad_state", "arena_too_small",
      "npu_failed",   "no_npu",    "bad_input",
  };
  const int n_load = (int)(sizeof load / sizeof load[0]);
  const int n_run = (int)(sizeof run / sizeof run[0]);
  if (status >= 0 && status < n_load) {
    return load[status];
  }
  if (status >= MT_STATUS_BAD_ARGUMENT && status < MT_STATUS_BAD_ARGUMENT + n_run) {
    return run[status - MT_STATUS_BAD_ARGUMENT];
  }
  return "unknown";
}
