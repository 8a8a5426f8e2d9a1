/* mt_port_default.c - weak defaults of the hooks in mt_port.h: no NPU, no profiling, no log.
 * A strong definition anywhere in the link replaces each one. */
#include "mt_port.h"

#define MT_WEAK __attribute__((weak))

MT_WEAK mt_status mt_ethosu_invoke(const mt_delegate_call *call)
{
  (void)call;
  return MT_STATUS_NO_NPU;
}

MT_WEAK void mt_port_op_begin(uint32_t op)
{
  (void)op;
}

MT_WEAK void mt_port_op_end(uint32_t op)
{
  (void)op;
}

MT_WEAK void mt_port_log(const char *line)
{
  (void)line;
}
