"""ddpsim.plan.planner.compute_bucket_assignment_by_size against torch's own C++ function.

Oracle: ``torch.distributed._compute_bucket_assignment_by_size`` (the reducer's
``compute_bucket_assignment_by_size`` bound to Python). It only looks at numel, element
size, dtype and device, so ``torch.empty(n, dtype=...)`` tensors stand in for parameters.
"""

from __future__ import annotations

import random
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ddpsim.plan.planner import compute_bucket_assignment_by_size  # noqa: E402
from ddpsim.units import DTYPE_SIZE_BYTES, MIB  # noqa: E402

if not hasattr(dist, "_compute_bucket_assignment_by_size"):  # pragma: no cover
    pytest.skip("torch.distributed has no _compute_bucket_assignment_by_size", allow_module_level=True)

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}

LIMIT_LISTS = [
    [MIB, 25 * MIB],
    [sys.maxsize],
    [25 * MIB],
    [4096],
    [1000, 3000, 50_000],
    [100, 1 << 20, 7, 300_000],
    [1, 2, 3, 4, 5],
    [8 * MIB, 8 * MIB, 64 * 1024],
]


def ours(numels, dtypes, limits, sparse, indices):
    sizes = [n * DTYPE_SIZE_BYTES[d] for n, d in zip(numels, dtypes)]
    return compute_bucket_assignment_by_size(sizes, dtypes, limits, sparse, indices)


def oracle(numels, dtypes, limits, sparse, indices):
    tensors = [torch.empty(n, dtype=TORCH_DTYPES[d]) for n, d in zip(numels, dtypes)]
    groups, lims = dist._compute_bucket_assignment_by_size(tensors, limits, list(sparse), list(indices))
    return [list(g) for g in groups], list(lims)


def random_case(rng: random.Random):
    n = rng.randint(1, 24)
    size_kind = rng.random()
    if size_kind < 0.3:
        numels = [rng.randint(1, 64) for _ in range(n)]
    elif size_kind < 0.6:
        numels = [rng.randint(1, 400_000) for _ in range(n)]
    else:
        numels = [rng.choice([1, 10, 768, 4096, 262_144, 1_000_000, 3_000_000, 7_000_000]) for _ in range(n)]
    pool = rng.choice([["float32"], ["float32", "float16"], ["float32", "bfloat16", "float64"], list(TORCH_DTYPES)])
    # leftovers of several dtypes come out in an unspecified (unordered_map) order when
    # tensor_indices is given; ddpsim reproduces libstdc++'s, so include those cases too
    dtypes = [rng.choice(pool) for _ in range(n)]
    sparse = [rng.random() < 0.15 for _ in range(n)] if rng.random() < 0.4 else []
    indices = list(range(n)) if rng.random() < 0.5 else []
    if indices:
        rng.shuffle(indices)
    if rng.random() < 0.8:
        limits = rng.choice(LIMIT_LISTS)
    else:
        limits = [rng.randint(1, 5_000_000) for _ in range(rng.randint(1, 4))]
    return numels, dtypes, limits, sparse, indices


@pytest.mark.parametrize("block", range(6))
def test_matches_torch_on_random_cases(block):
    rng = random.Random(20260 + block)
    for case in range(250):  # 6 x 250 = 1500 cases
        args = random_case(rng)
        assert ours(*args) == oracle(*args), f"block {block} case {case}: {args}"


def test_random_cases_cover_the_interesting_shapes():
    """The generator does produce sparse flags, shuffled labels, several dtypes and multi-limit lists."""
    rng = random.Random(20260)
    cases = [random_case(rng) for _ in range(250)]
    assert any(any(s) for _, _, _, s, _ in cases)
    assert any(ix and ix != sorted(ix) for _, _, _, _, ix in cases)
    assert any(len(set(d)) >= 3 for _, d, _, _, _ in cases)
    assert any(len(lim) >= 3 for _, _, lim, _, _ in cases)
    assert any(lim == [sys.maxsize] for _, _, lim, _, _ in cases)


# ---- hand-worked examples -------------------------------------------------------------

REF_NUMELS = [100, 300000, 10, 262144, 5_000_000, 7_000_000, 200]


def test_reference_example_without_indices():
    # fp32 bytes: 400, 1.2e6 (>= 1 MiB closes bucket 0 = [0, 1]); then 40 + 1048576 + 2e7 + 2.8e7
    # reaches 25 MiB = 26214400 only at index 5 -> [2, 3, 4, 5]; [6] is left over.
    expected = ([[0, 1], [2, 3, 4, 5], [6]], [1048576, 26214400, 26214400])
    args = (REF_NUMELS, ["float32"] * 7, [MIB, 25 * MIB], [], [])
    assert ours(*args) == expected
    assert oracle(*args) == expected


def test_reference_example_in_ready_order_is_not_sorted():
    # tensors given in ready order 6..0 (labels = their indices), limits [1 MiB, 25 MiB]:
    # 800 B + 28,000,000 B >= 1 MiB closes [6, 5]; then 20,000,000 + 1,048,576 + 40 + 1,200,000
    # + 400 = 22,249,016 B < 25 MiB, so [4, 3, 2, 1, 0] is a leftover bucket. No sort.
    order = [6, 5, 4, 3, 2, 1, 0]
    numels = [REF_NUMELS[i] for i in order]
    expected = ([[6, 5], [4, 3, 2, 1, 0]], [1048576, 26214400])
    args = (numels, ["float32"] * 7, [MIB, 25 * MIB], [], order)
    assert ours(*args) == expected
    assert oracle(*args) == expected


def test_tensor_indices_are_labels_only():
    # tensors in the original order, labels reversed: the grouping follows the sizes, the
    # labels are just written into it (and no sort happens).
    expected = ([[6, 5], [4, 3, 2, 1], [0]], [1048576, 26214400, 26214400])
    args = (REF_NUMELS, ["float32"] * 7, [MIB, 25 * MIB], [], [6, 5, 4, 3, 2, 1, 0])
    assert ours(*args) == expected
    assert oracle(*args) == expected


def test_tensor_larger_than_cap_closes_its_bucket():
    # cap 1000 B: 100 B, then 4000 B -> 4100 >= 1000 closes [0, 1]; 200 B + 200 B stay open.
    args = ([25, 1000, 50, 50], ["float32"] * 4, [1000], [], [])
    assert ours(*args) == ([[0, 1], [2, 3]], [1000, 1000]) == oracle(*args)


def test_last_limit_is_reused():
    # limits [100, 200]: 100 B closes [0]; then 200-B buckets forever: [1,2], [3,4], [5]
    args = ([25, 25, 25, 25, 25, 25], ["float32"] * 6, [100, 200], [], [])
    assert ours(*args) == ([[0], [1, 2], [3, 4], [5]], [100, 200, 200, 200]) == oracle(*args)


def test_every_dtype_has_its_own_first_limit():
    # fp32 and fp16 interleaved, limits [8, 1000]: each dtype's first 8-byte bucket closes on its
    # first tensor (16 B fp32 = index 0; 8 B fp16 = index 1); the rest are left over.
    args = ([4, 4, 4, 4], ["float32", "float16", "float32", "float16"], [8, 1000], [], [])
    assert ours(*args) == ([[0], [1], [2], [3]], [8, 8, 1000, 1000]) == oracle(*args)


def test_sparse_gradient_gets_its_own_bucket_with_no_limit():
    # expect_sparse_gradient indexed by label: label 1 alone with limit 0
    args = ([10, 10, 10], ["float32"] * 3, [sys.maxsize], [False, True, False], [])
    assert ours(*args) == ([[0, 2], [1]], [sys.maxsize, 0]) == oracle(*args)
    # with labels the flag follows the label, not the position
    args = ([10, 10, 10], ["float32"] * 3, [sys.maxsize], [False, True, False], [1, 2, 0])
    assert ours(*args) == ([[1], [2, 0]], [0, sys.maxsize]) == oracle(*args)


def test_one_bucket_per_dtype_with_maxsize():
    args = ([3, 5, 7, 9], ["float32", "bfloat16", "float32", "bfloat16"], [sys.maxsize], [], [])
    assert ours(*args) == ([[0, 2], [1, 3]], [sys.maxsize, sys.maxsize]) == oracle(*args)
