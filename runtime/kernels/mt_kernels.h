/*
 * mt_kernels.h - every int8 kernel of mcutorch: one mt_kernel_fn per (op, variant).
 *
 * Kernel tables (mt_kernels_all.c, or the per-model table the compiler emits with
 * mcutorch.device.kernels.kernel_table_c) point at these; the interpreter calls them
 * through the table only. Each kernel holds its MVE, DSP and portable C paths.
 * Generated from the op registry (src/mcutorch/ops) by `python -m
 * mcutorch.device.generate`; do not edit.
 *
 *   conv/        conv2d, depthwise_conv2d, fully_connected, conv_transpose2d, matmul, conv2d_add
 *   elementwise/ add, mul, clamp, lut, rescale, maximum, minimum, sub, div, compare, where
 *   pool/        max_pool2d, avg_pool2d, resize
 *   softmax/     softmax, log_softmax
 *   movement/    transpose, concat, pad, copy, strided_slice, gather, ring_write, embedding
 *   reduce/      reduce_sum, reduce_max, reduce_min, reduce_var, norm
 *   recurrent/   lstm, gru, rnn_tanh, rnn_relu
 */
#ifndef MT_KERNELS_H
#define MT_KERNELS_H

#include "mt_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

mt_status mt_conv2d_s8(const mt_op_args *args);
mt_status mt_depthwise_conv2d_s8(const mt_op_args *args);
mt_status mt_fully_connected_s8(const mt_op_args *args);
mt_status mt_fully_connected_folded_s8(const mt_op_args *args); /* folded: folded: bias holds bias - in_zp * sum(w), in_zp is 0 */
mt_status mt_add_s8(const mt_op_args *args);
mt_status mt_mul_s8(const mt_op_args *args);
mt_status mt_max_pool2d_s8(const mt_op_args *args);
mt_status mt_avg_pool2d_s8(const mt_op_args *args);
mt_status mt_clamp_s8(const mt_op_args *args);
mt_status mt_lut_s8(const mt_op_args *args);
mt_status mt_rescale_s8(const mt_op_args *args);
mt_status mt_softmax_s8(const mt_op_args *args);
mt_status mt_transpose_s8(const mt_op_args *args);
mt_status mt_concat_s8(const mt_op_args *args);
mt_status mt_pad_s8(const mt_op_args *args);
mt_status mt_copy_s8(const mt_op_args *args);
mt_status mt_maximum_s8(const mt_op_args *args);
mt_status mt_minimum_s8(const mt_op_args *args);
mt_status mt_strided_slice_s8(const mt_op_args *args);
mt_status mt_gather_s8(const mt_op_args *args);
mt_status mt_reduce_sum_s8(const mt_op_args *args);
mt_status mt_reduce_max_s8(const mt_op_args *args);
mt_status mt_reduce_min_s8(const mt_op_args *args);
mt_status mt_log_softmax_s8(const mt_op_args *args);
mt_status mt_reduce_var_s8(const mt_op_args *args);
mt_status mt_norm_s8(const mt_op_args *args);
mt_status mt_sub_s8(const mt_op_args *args);
mt_status mt_div_s8(const mt_op_args *args);
mt_status mt_compare_s8(const mt_op_args *args);
mt_status mt_where_s8(const mt_op_args *args);
mt_status mt_conv_transpose2d_s8(const mt_op_args *args);
mt_status mt_resize_s8(const mt_op_args *args);
mt_status mt_matmul_s8(const mt_op_args *args);
mt_status mt_conv2d_add_s8(const mt_op_args *args);
mt_status mt_ring_write_s8(const mt_op_args *args);
mt_status mt_embedding_s8(const mt_op_args *args);
mt_status mt_lstm_s8(const mt_op_args *args);
mt_status mt_gru_s8(const mt_op_args *args);
mt_status mt_rnn_tanh_s8(const mt_op_args *args);
mt_status mt_rnn_relu_s8(const mt_op_args *args);

/* Every kernel above, indexed by opcode (rows of ops without a kernel are NULL). */
extern const mt_kernel_table mt_kernels_all;

/* Only the kernels one model uses: the C file the compiler emits
 * (mcutorch.device.kernels.kernel_table_c) defines it. */
extern const mt_kernel_table mt_kernels_model;

#ifdef __cplusplus
}
#endif
#endif /* MT_KERNELS_H */
