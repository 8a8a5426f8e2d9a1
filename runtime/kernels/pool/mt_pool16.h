/*
 * mt_pool16.h - the int16 forms of max_pool2d and avg_pool2d (a16w8, docs/numerics.md section
 * 6), defined in mt_pool_s16.c; mt_max_pool2d_s8 and mt_avg_pool2d_s8 call them for an int16 x.
 */
#ifndef MT_POOL16_H
#define MT_POOL16_H

#include "mt_kernel.h"

#ifndef MT_WEAK16
/* The int16 bodies are weak references: a firmware whose program has no int16 op of this kind
 * leaves them out (mcutorch.device.kernels.sources_for), the pointer is then NULL and the int8
 * kernel refuses an int16 operand (bad argument). */
#if defined(__GNUC__)
#define MT_WEAK16 __attribute__((weak))
#else /* !__GNUC__: always linked */
#define MT_WEAK16
#endif /* __GNUC__ */
#endif /* MT_WEAK16 */
mt_status mt_max_pool2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_avg_pool2d_s16(const mt_op_args *args) MT_WEAK16;

#endif /* MT_POOL16_H */
