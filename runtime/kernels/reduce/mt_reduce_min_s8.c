/*
 * mt_reduce_min_s8.c - y = clamp(min over the reduced dims of x, act_min, act_max); x and y
 * share qparams (the loops are mt_reduce_minmax.h's).
 */
#include "mt_reduce_minmax.h"

// x: (d0, ..., dr-1) int8, r in 1..6  ->  y: same rank, reduced dims 1, int8
mt_status mt_reduce_min_s8(const mt_op_args *args)
{
  return mt_reduce_minmax_s8(args, 0);
}
