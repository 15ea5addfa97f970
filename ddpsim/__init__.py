"""ddpsim: predict PyTorch DistributedDataParallel training speed, bucket by bucket.

Trace a real model (:mod:`ddpsim.capture`), plan DDP's buckets exactly (:mod:`ddpsim.plan`),
model the machine (:mod:`ddpsim.topology`, :mod:`ddpsim.collectives`), simulate the Reducer
in SimPy (:mod:`ddpsim.engine`), sweep and report (:mod:`ddpsim.api`), and validate on real
hardware with the companion ``executor`` package.
"""

__version__ = "0.1.0"
