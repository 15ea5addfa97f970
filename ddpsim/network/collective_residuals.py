"""How far measured all-reduces fall from ddpsim's NCCL model: the spread of its residuals.

Quantiles of measured / model time (:mod:`ddpsim.network.nccl_exec`) over the ``normal`` and
``forced_algo`` public curves of InfiniBand / RoCE / NVLink / PCIe systems
(``benchmarks/data/nccl-curves/``), every size from 64 KiB to 64 MiB, as
``python benchmarks/bench_collective_score.py --quantiles`` prints them. They set the collective
term of the recommendation's uncertainty band (:mod:`ddpsim.pipeline.resampling`). Not centred on
1: runs are slower than the model more often, and by more, than they are faster.
"""

from __future__ import annotations

#: the sizes the quantiles are taken over, bytes
MID_LO_BYTES = 64 * 1024
MID_HI_BYTES = 64 * 2 ** 20
#: measured / model time at the 10th and 90th percentiles (164 sizes of 17 curves)
MID_SIZE_RATIOS = (0.781, 2.104)
