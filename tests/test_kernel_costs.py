"""The reducer's and comm hooks' kernel costs (ddpsim.network.kernel_costs) against closed forms
worked out by hand. Bandwidths are chosen so that every result is a small exact number."""

from __future__ import annotations

import pytest

from ddpsim.network.kernel_costs import (bucket_copy_out_s, copy_kernel_s, fp16_compress_s, fp16_decompress_s,
                                         kernel_s, mp_bucket_cast_s, mp_param_cast_s, mp_upcast_s, param_elem_bytes,
                                         powersgd_kernel_s, powersgd_split, read_write_s)
from ddpsim.plan.planner import MixedPrecision


def test_kernel_is_memory_bound_unless_a_peak_says_more():
    assert kernel_s(1000, 0, 500.0, None) == 2.0
    assert kernel_s(1000, 4000, 500.0, 1000.0) == 4.0        # flops / peak wins
    assert kernel_s(1000, 1000, 500.0, 1000.0) == 2.0        # bytes / bandwidth wins
    assert kernel_s(1000, 0, None, None) == 0.0              # no bandwidth: free


def test_copy_kernel_has_a_floor_but_an_empty_one_is_free():
    assert copy_kernel_s(8, 1e9, 4e-6) == 4e-6
    assert copy_kernel_s(8000, 1000.0, 4e-6) == 8.0
    assert copy_kernel_s(0, 1000.0, 4e-6) == 0.0


def test_gradient_copies():
    # a 4 KiB gradient at 1 KiB/s: copy-in reads and writes it (8 s), a zero-fill writes it (4 s)
    assert read_write_s(4096, 1024.0, 0.0) == 8.0
    assert copy_kernel_s(4096, 1024.0, 0.0) == 4.0
    # copy-out of two used parameters of 3 and 5 fp32 elements from an fp32 bucket: 8 bytes
    # per element at 8 B/s -> 3 s + 5 s; with a 4 s floor per kernel: 4 + 5
    assert bucket_copy_out_s([3, 5], 4, 4, 8.0, 0.0) == 8.0
    assert bucket_copy_out_s([3, 5], 4, 4, 8.0, 4.0) == 9.0
    # batched_grad_copy: _foreach_copy_ of 10 fp32 elements (80 bytes) at 80 B/s, one kernel
    assert read_write_s(10 * 4, 80.0, 0.0) == 1.0
    assert read_write_s(10 * 4, 80.0, 2.0) == 2.0        # one floor for the whole bucket


def test_mixed_precision_kernels():
    assert param_elem_bytes("float32", None) == (4, 4, 4)
    assert param_elem_bytes("float32", MixedPrecision(param_dtype="bfloat16")) == (4, 2, 2)
    assert param_elem_bytes("float32", MixedPrecision(param_dtype="float16", reduce_dtype="float32")) == (4, 2, 4)
    # 400 bytes of fp32 parameters read, 200 bytes of bf16 copies written, at 100 B/s
    assert mp_param_cast_s(400, 200, 100.0) == 6.0
    # the bucket's cast to reduce_dtype: 8 elements, read 4 write 2 -> 48 bytes; none when equal
    assert mp_bucket_cast_s(8, 4, 2, 8.0) == 6.0
    assert mp_bucket_cast_s(8, 2, 2, 8.0) == 0.0
    # div_ of a 4-element bucket in fp16 (r+w 16 bytes) + upcast of 2 used elements fp16 -> fp32 (12 bytes)
    assert mp_upcast_s(4, 2, 2, 2, 4, 4.0) == 7.0
    assert mp_upcast_s(4, 2, 4, 4, 4, 4.0) == 8.0            # no upcast when the dtypes agree


def test_comm_hook_kernels():
    assert read_write_s(100, 50.0) == 4.0            # read + write the bucket
    # fp16 of 1024 fp32 elements: read 4096, write 2048, then div_ reads and writes 2048 each
    assert fp16_compress_s(4096, 1024, 1024.0) == 10.0
    assert fp16_decompress_s(1024, 1024.0, 0.0) == 6.0       # read 2N, write 4N
    assert copy_kernel_s(1024, 512.0, 0.0) == 2.0
    assert read_write_s(1024, 512.0) == 4.0


def test_powersgd_split_of_one_compressible_matrix():
    # 8 x 8 at rank 1: (8 + 8) * 1 * 2 = 32 < 64, compressed; P and Q 8 elements each
    ps = powersgd_split([(8, 8)], 4, 1)
    assert (ps["uncompressed_bytes"], ps["p_bytes"], ps["q_bytes"]) == (0, 32, 32)
    # hook: 5 * 64 elements of error feedback and clone, M read (64), P written (8): 392 x 4 bytes
    assert (ps["launch_bytes"], ps["launch_flops"]) == (1568, 128 + 16)
    assert (ps["qs_bytes"], ps["qs_flops"]) == (320, 128 + 16)
    assert (ps["decompress_bytes"], ps["decompress_flops"]) == ((64 + 8 + 8 + 192) * 4, 128)
    assert powersgd_kernel_s(ps, "launch", 1568.0, None) == 1.0
    assert powersgd_kernel_s(ps, "launch", 1568.0, 72.0) == 2.0      # 144 flops at 72 flop/s
    assert powersgd_kernel_s(ps, "qs", 320.0, None) == 1.0
    assert powersgd_kernel_s(ps, "decompress", 1088.0, 1e9) == 1.0


def test_powersgd_leaves_vectors_and_incompressible_matrices_uncompressed():
    # (8,) is 1-D; 4 x 4 at rank 4: (4 + 4) * 4 * 2 = 64 >= 16, not worth compressing
    ps = powersgd_split([(8,), (4, 4)], 2, 4)
    assert (ps["uncompressed_bytes"], ps["p_bytes"], ps["q_bytes"]) == (48, 0, 0)
    assert ps["launch_bytes"] == pytest.approx((5 * 24 + 2 * 24) * 2)
