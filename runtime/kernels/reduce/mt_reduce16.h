/*
 * mt_reduce16.h - the int16 form of reduce_sum (a16w8, docs/numerics.md section 6), defined in
 * mt_reduce_sum_s16.c; mt_reduce_sum_s8 calls it for an int16 x.
 */
#ifndef MT_REDUCE16_H
#define MT_REDUCE16_H

#include "mt_kernel.h"
#include "mt_kernel_util.h" /* MT_WEAK16 */

mt_status mt_reduce_sum_s16(const mt_op_args *args) MT_WEAK16;

#endif /* MT_REDUCE16_H */
