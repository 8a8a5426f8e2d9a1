/*
 * mt_minimum_s8.c - y = clamp(min(a, b), act_min, act_max) element-wise; a, b and y share
 * qparams (the loop is mt_minmax.h's); y may be a or b (in place).
 */
#include "mt_minmax.h"

// a, b: (...) int8, same shape  ->  y: (...) int8, same shape
mt_status mt_minimum_s8(const mt_op_args *args)
{
  return mt_minmax_s8(args, 0);
}
