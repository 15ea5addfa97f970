"""ddpsim: predict PyTorch DistributedDataParallel training speed, bucket by bucket.

One folder per stage of the pipeline: trace a real model (:mod:`ddpsim.trace`), plan DDP's
buckets exactly (:mod:`ddpsim.plan`), model the machine's collectives (:mod:`ddpsim.network`),
simulate the Reducer in SimPy (:mod:`ddpsim.engine`), read a measured machine
(:mod:`ddpsim.calibration`), build and sweep scenarios (:mod:`ddpsim.pipeline`), write reports
(:mod:`ddpsim.report`) through the facade :mod:`ddpsim.api`, and validate against real
``torch.distributed`` runs launched by the companion ``executor`` package
(:mod:`ddpsim.validation`). Imports point down that list only; ``docs/ARCHITECTURE.md`` draws
it and ``tests/test_layering.py`` enforces it.
"""

__version__ = "0.1.0"
