/* npu_hook_mixed.c - an NPU hook that runs delegate 0 "on the NPU" (leaving its outputs as they
 * are) and answers MT_STATUS_NO_NPU for every other: a mix mt_invoke must refuse
 * (tests/py/test_ethos_u.py builds the host runner with it in place of the weak default). */
#include "mt_port.h"

mt_status mt_ethosu_invoke(const mt_delegate_call *call)
{
  return call->index == 0 ? MT_STATUS_OK : MT_STATUS_NO_NPU;
}
