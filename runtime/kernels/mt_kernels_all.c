/*
 * mt_kernels_all.c - a kernel table with every kernel, indexed by opcode (tests, and
 * firmware that does not want a per-model table). Rows of ops without a kernel
 * (delegate: the interpreter runs it) stay NULL.
 * Generated from the op registry (src/mcutorch/ops) by `python -m
 * mcutorch.device.generate`; do not edit.
 */
#include "mt_kernels.h"

static const mt_kernel_row mt_all_rows[MT_OP_COUNT] = {
    [MT_OP_CONV2D] = {{mt_conv2d_s8, NULL, NULL, NULL}},
    [MT_OP_DEPTHWISE_CONV2D] = {{mt_depthwise_conv2d_s8, NULL, NULL, NULL}},
    [MT_OP_FULLY_CONNECTED] = {{mt_fully_connected_s8, mt_fully_connected_folded_s8, NULL, NULL}},
    [MT_OP_ADD] = {{mt_add_s8, NULL, NULL, NULL}},
    [MT_OP_MUL] = {{mt_mul_s8, NULL, NULL, NULL}},
    [MT_OP_MAX_POOL2D] = {{mt_max_pool2d_s8, NULL, NULL, NULL}},
    [MT_OP_AVG_POOL2D] = {{mt_avg_pool2d_s8, NULL, NULL, NULL}},
    [MT_OP_CLAMP] = {{mt_clamp_s8, NULL, NULL, NULL}},
    [MT_OP_LUT] = {{mt_lut_s8, NULL, NULL, NULL}},
    [MT_OP_RESCALE] = {{mt_rescale_s8, NULL, NULL, NULL}},
    [MT_OP_SOFTMAX] = {{mt_softmax_s8, NULL, NULL, NULL}},
    [MT_OP_TRANSPOSE] = {{mt_transpose_s8, NULL, NULL, NULL}},
    [MT_OP_CONCAT] = {{mt_concat_s8, NULL, NULL, NULL}},
    [MT_OP_PAD] = {{mt_pad_s8, NULL, NULL, NULL}},
    [MT_OP_COPY] = {{mt_copy_s8, NULL, NULL, NULL}},
    [MT_OP_MAXIMUM] = {{mt_maximum_s8, NULL, NULL, NULL}},
    [MT_OP_MINIMUM] = {{mt_minimum_s8, NULL, NULL, NULL}},
    [MT_OP_STRIDED_SLICE] = {{mt_strided_slice_s8, NULL, NULL, NULL}},
    [MT_OP_GATHER] = {{mt_gather_s8, NULL, NULL, NULL}},
    [MT_OP_REDUCE_SUM] = {{mt_reduce_sum_s8, NULL, NULL, NULL}},
    [MT_OP_REDUCE_MAX] = {{mt_reduce_max_s8, NULL, NULL, NULL}},
    [MT_OP_REDUCE_MIN] = {{mt_reduce_min_s8, NULL, NULL, NULL}},
    [MT_OP_LOG_SOFTMAX] = {{mt_log_softmax_s8, NULL, NULL, NULL}},
    [MT_OP_REDUCE_VAR] = {{mt_reduce_var_s8, NULL, NULL, NULL}},
    [MT_OP_NORM] = {{mt_norm_s8, NULL, NULL, NULL}},
    [MT_OP_SUB] = {{mt_sub_s8, NULL, NULL, NULL}},
    [MT_OP_DIV] = {{mt_div_s8, NULL, NULL, NULL}},
    [MT_OP_COMPARE] = {{mt_compare_s8, NULL, NULL, NULL}},
    [MT_OP_WHERE] = {{mt_where_s8, NULL, NULL, NULL}},
    [MT_OP_CONV_TRANSPOSE2D] = {{mt_conv_transpose2d_s8, NULL, NULL, NULL}},
    [MT_OP_RESIZE] = {{mt_resize_s8, NULL, NULL, NULL}},
    [MT_OP_MATMUL] = {{mt_matmul_s8, NULL, NULL, NULL}},
    [MT_OP_CONV2D_ADD] = {{mt_conv2d_add_s8, NULL, NULL, NULL}},
    [MT_OP_RING_WRITE] = {{mt_ring_write_s8, NULL, NULL, NULL}},
    [MT_OP_EMBEDDING] = {{mt_embedding_s8, NULL, NULL, NULL}},
    [MT_OP_LSTM] = {{mt_lstm_s8, NULL, NULL, NULL}},
    [MT_OP_GRU] = {{mt_gru_s8, NULL, NULL, NULL}},
    [MT_OP_RNN_TANH] = {{mt_rnn_tanh_s8, NULL, NULL, NULL}},
    [MT_OP_RNN_RELU] = {{mt_rnn_relu_s8, NULL, NULL, NULL}},
};

const mt_kernel_table mt_kernels_all = {mt_all_rows, MT_OP_COUNT};
