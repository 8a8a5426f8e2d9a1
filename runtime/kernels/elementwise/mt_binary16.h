/*
 * mt_binary16.h - the int16 forms of add, sub and mul (a16w8, docs/numerics.md section 6),
 * defined in mt_binary_s16.c; mt_add_s8, mt_sub_s8 and mt_mul_s8 call them for int16 operands.
 */
#ifndef MT_BINARY16_H
#define MT_BINARY16_H

#include "mt_kernel.h"
#include "mt_kernel_util.h" /* MT_WEAK16 */

mt_status mt_add_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_sub_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_mul_s16(const mt_op_args *args) MT_WEAK16;

#endif /* MT_BINARY16_H */
