/*
 * mt_pool16.h - the int16 forms of max_pool2d and avg_pool2d (a16w8, docs/numerics.md section
 * 6), defined in mt_pool_s16.c; mt_max_pool2d_s8 and mt_avg_pool2d_s8 call them for an int16 x.
 */
#ifndef MT_POOL16_H
#define MT_POOL16_H

#include "mt_kernel.h"
#include "mt_kernel_util.h" /* MT_WEAK16 */

mt_status mt_max_pool2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_avg_pool2d_s16(const mt_op_args *args) MT_WEAK16;

#endif /* MT_POOL16_H */
