"""lax: the primitives, with jax.lax's names and signatures.

One module per family (``elementwise``, ``shapes``, ``reductions``, ``linalg``, ...); each
primitive is defined once there with all its rules (DESIGN.md section 3). This package
re-exports the public wrappers.

Import order: the first statement imports ``tracer``, which imports its core, then this
package's families as its public face needs them, then the public face itself (DESIGN.md
section 2); so ``import lax`` first and ``import tracer`` first run the same one-way
order, and nothing here calls back into ``tracer``. (When ``import lax`` comes first,
``tracer``'s public face is imported while this module is still empty: it reads
``lax.<name>`` only inside functions, never at import -- tests/test_import_layering.py.)
"""
import tracer  # noqa: F401  (the layers below and above lax, in order)
from lax.elementwise import (
    RoundingMethod, abs, add, atan2, bitcast_convert_type, bitwise_and, bitwise_not,
    bitwise_or, bitwise_xor, cbrt, ceil, clamp, clz, complex, conj, convert_element_type, cos,
    div, eq, eq_total_order, erf, exp, exp2, expm1, floor, ge, ge_total_order, gt,
    gt_total_order, imag, integer_pow,
    is_finite, le, le_total_order, log, log1p, logistic, lt, lt_total_order, max, min, mul, ne,
    ne_total_order,
    neg, population_count, pow, real, reciprocal, reduce_precision, rem, round,
    round_nearest_even, rsqrt, select, select_n, shift_left, shift_right_arithmetic,
    shift_right_logical, sign, sin, sqrt, square, sub, tan, tanh)
from lax.elementwise import (
    abs_p, add_p, and_p, atan2_p, bitcast_convert_type_p, cbrt_p, ceil_p, clamp_p, clz_p,
    complex_p, conj_p, convert_element_type_p, cos_p, div_p, eq_p, eq_to_p, erf_p, exp_p,
    exp2_p, expm1_p, floor_p, ge_p, ge_to_p, gt_p, gt_to_p, imag_p, integer_pow_p, is_finite_p, le_p, le_to_p,
    log_p, log1p_p, logistic_p, lt_p, lt_to_p, max_p, min_p, mul_p, ne_p, ne_to_p, neg_p, not_p, or_p,
    population_count_p, pow_p, real_p, reduce_precision_p, rem_p, round_p, rsqrt_p,
    select_n_p, shift_left_p, shift_right_arithmetic_p, shift_right_logical_p, sign_p, sin_p,
    sqrt_p, square_p, sub_p, tan_p, tanh_p, xor_p)
from lax.shapes import (
    broadcast, broadcast_in_dim, broadcast_to_rank, broadcasted_iota, collapse, concatenate,
    expand_dims, full, full_like, index_in_dim, iota, pad, reshape, rev, slice, slice_in_dim,
    squeeze, tile, transpose)
from lax.shapes import (broadcast_in_dim_p, concatenate_p, iota_p, pad_p, reshape_p, rev_p,
                        slice_p, transpose_p)
from lax.reductions import (argmax, argmin, reduce, reduce_and, reduce_max, reduce_min,
                            reduce_or, reduce_prod, reduce_sum, reduce_xor)
from lax.reductions import (argmax_p, argmin_p, reduce_and_p, reduce_max_p, reduce_min_p,
                            reduce_or_p, reduce_p, reduce_prod_p, reduce_sum_p, reduce_xor_p)
from lax.linalg import DotDimensionNumbers, Precision, batch_matmul, dot, dot_general
from lax.linalg import dot_general_p
from lax.collectives import (all_gather, axis_index, pmax, pmean, pmin, psum, all_gather_p,
                             axis_index_p, pmax_p, pmin_p, psum_p)
from tracer.interpreters.ad import add_any_p, stop_gradient, stop_gradient_p

bitwise_not = bitwise_not
from lax.random_bits import (RandomAlgorithm, rng_bit_generator, rng_normal, rng_seed,
                             rng_uniform, threefry2x32)
from lax.random_bits import (rng_bit_generator_p, rng_normal_p, rng_uniform_p,
                             threefry2x32_p)
from lax.sort import sort, sort_key_val, top_k
from lax.sort import sort_p, top_k_p
from lax.indexing import (
    GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers, dynamic_index_in_dim,
    dynamic_slice, dynamic_slice_in_dim, dynamic_update_index_in_dim, dynamic_update_slice,
    dynamic_update_slice_in_dim, gather, index_take, scatter, scatter_add, scatter_apply,
    scatter_max, scatter_min, scatter_mul, scatter_sub, scatter_with_computation)
from lax.indexing import (dynamic_slice_p, dynamic_update_slice_p, gather_p, scatter_add_p,
                          scatter_max_p, scatter_min_p, scatter_mul_p, scatter_p,
                          scatter_sub_p)
from lax.fft import FftType, fft, fft_p
from lax import linalg
from lax.decompositions import (cholesky_p, eig_p, eigh_p, lu_p, qr_p, svd_p,
                                triangular_solve_p)

from lax.control_flow import (associative_scan, closed_call, composite, cond, fori_loop, map,
                              optimization_barrier, platform_dependent, scan, switch,
                              while_loop)
from lax.control_flow import composite_p, cond_p, optimization_barrier_p, scan_p, while_p
from lax.special import (
    acos, acosh, asin, asinh, atan, atanh, bessel_i0e, bessel_i1e, betainc, broadcast_add,
    broadcast_and, broadcast_atan2, broadcast_compare, broadcast_complex, broadcast_divide,
    broadcast_maximum, broadcast_minimum, broadcast_multiply, broadcast_next_after,
    broadcast_or, broadcast_polygamma, broadcast_power, broadcast_remainder, broadcast_select,
    broadcast_shift_left, broadcast_shift_right_arithmetic, broadcast_shift_right_logical,
    broadcast_subtract, broadcast_xor, broadcast_zeta, constant_like, cosh, digamma, erf_inv,
    erfc, erfc_inv, erfcx, igamma, igamma_grad_a, igammac, is_inf, is_neg_inf, is_pos_inf,
    lgamma, next_after, nextafter, polygamma, random_gamma_grad, sinh, zeta)
from lax.special import (
    acos_p, acosh_p, asin_p, asinh_p, atan_p, atanh_p, bessel_i0e_p, bessel_i1e_p, cosh_p,
    digamma_p, erf_inv_p, erfc_inv_p, erfc_p, erfcx_p, igamma_grad_a_p, igamma_p, igammac_p,
    is_inf_p, is_neg_inf_p, is_pos_inf_p, lgamma_p, next_after_p, polygamma_p,
    regularized_incomplete_beta_p, sinh_p, zeta_p)
from lax.convolution import (ConvDimensionNumbers, ConvGeneralDilatedDimensionNumbers, conv,
                             conv_dimension_numbers, conv_general_dilated,
                             conv_general_dilated_patches, conv_general_permutations,
                             conv_general_shape_tuple, conv_shape_tuple, conv_transpose,
                             conv_with_general_padding, padtype_to_pads)
from lax.convolution import conv_general_dilated_p
from lax.windowed import (batch_norm_grad, batch_norm_inference, batch_norm_training,
                          cumlogsumexp, cummax, cummin, cumprod, cumsum, reduce_window,
                          reduce_window_max, reduce_window_min, reduce_window_sum,
                          select_and_scatter, select_and_scatter_add)
from lax.windowed import (cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p,
                          reduce_window_max_p, reduce_window_min_p, reduce_window_sum_p,
                          select_and_gather_add_p, select_and_scatter_add_p,
                          select_and_scatter_p)
from lax.helpers_extra import (
    PrecisionLike, approx_max_k, approx_min_k, broadcast_like, broadcast_shapes,
    conv_general_dilated_local, conv_transpose_shape_tuple, dtype, empty, get_dimension_size,
    reduce_window_shape_tuple, scaled_dot, shape_as_value, split, stack, stage, unstack,
    with_sharding_constraint, xla_map)
from lax.ragged import RaggedDotDimensionNumbers, ragged_dot, ragged_dot_general
from lax.integer_ops import mulhi, mulhi_p
from lax.tokens import (after_all, after_all_p, create_token, create_token_p, dce_sink,
                        dce_sink_p)
from lax.solves import custom_linear_solve, custom_root, linear_solve_p
from lax.collectives import (all_to_all, all_to_all_p, axis_size, pbroadcast, pbroadcast_p,
                             pcast, ppermute, ppermute_p, precv, precv_p, psend, psend_p,
                             pshuffle, psum_scatter, pswapaxes, ragged_all_to_all,
                             ragged_all_to_all_p, reduce_scatter_p)
from lax.callbacks import debug_callback_p, io_callback_p, pure_callback_p
