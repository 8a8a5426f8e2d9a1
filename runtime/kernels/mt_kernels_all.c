/*
 * mt_kernels_all.c - a kernel table with every kernel, indexed by opcode (tests, and firmware
 * that does not want a per-model table). The delegate row stays NULL: the interpreter runs it.
 */
#include "mt_kernels.h"

#define MT_ROW(fn) {{fn, NULL, NULL, NULL}}
#define MT_ROW2(fn, fn1) {{fn, fn1, NULL, NULL}}

static const mt_kernel_row mt_all_rows[MT_OP_COUNT] = {
    [MT_OP_CONV2D] = MT_ROW(mt_conv2d_s8),
    [MT_OP_DEPTHWISE_CONV2D] = MT_ROW(mt_depthwise_conv2d_s8),
    [MT_OP_FULLY_CONNECTED] = MT_ROW2(mt_fully_connected_s8, mt_fully_connected_folded_s8),
    [MT_OP_ADD] = MT_ROW(mt_add_s8),
    [MT_OP_MUL] = MT_ROW(mt_mul_s8),
    [MT_OP_MAX_POOL2D] = MT_ROW(mt_max_pool2d_s8),
    [MT_OP_AVG_POOL2D] = MT_ROW(mt_avg_pool2d_s8),
    [MT_OP_CLAMP] = MT_ROW(mt_clamp_s8),
    [MT_OP_LUT] = MT_ROW(mt_lut_s8),
    [MT_OP_RESCALE] = MT_ROW(mt_rescale_s8),
    [MT_OP_SOFTMAX] = MT_ROW(mt_softmax_s8),
    [MT_OP_TRANSPOSE] = MT_ROW(mt_transpose_s8),
    [MT_OP_CONCAT] = MT_ROW(mt_concat_s8),
    [MT_OP_PAD] = MT_ROW(mt_pad_s8),
    [MT_OP_COPY] = MT_ROW(mt_copy_s8),
    [MT_OP_DELEGATE] = MT_ROW(NULL),
};

const mt_kernel_table mt_kernels_all = {mt_all_rows, MT_OP_COUNT};
