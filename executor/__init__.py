"""ddpsim's executor: real measurements under ``torchrun`` (NCCL on GPUs, gloo on CPUs).

Runnable on a node that has ONLY torch installed::

    torchrun --nproc-per-node 8 -m executor collectives --out cal.json
    torchrun --nproc-per-node 8 -m executor ddp --model gpt2-124m --bucket-cap-mb 25 --out m.json
    torchrun --nproc-per-node 8 -m executor replay --plan plan.json --trace t.json --out r.json

Steps (one module each):

* :mod:`executor.collectives_step` -- nccl-tests-like all-reduce / broadcast sweep, compute/comm
  interference and copy bandwidth -> the calibration JSON ``ddpsim`` reads.
* :mod:`executor.ddp_step` -- a model under real DDP; iteration times, optional per-bucket
  collective timestamps (comm hook), DDP's own logging data, and whether DDP's rebuilt
  buckets equal the plan ddpsim predicts.
* :mod:`executor.replay` -- any bucket plan run by the executor's own reducer, over the real
  model or over synthetic compute timed from a trace.
* :mod:`executor.capture_step` -- a trace captured on every rank at once (the run's conditions).
* :mod:`executor.round_step` -- one validation round in one launch: before each bucket_cap_mb a
  slice of the trace, then that cap under a fresh real DDP over the same module.

Lifecycle (:mod:`executor.runtime`): torchrun's environment is validated first, the process
group is created with an explicit timeout, a watchdog ends a rank that makes no progress
within the timeout (a dead peer), and ``destroy_process_group()`` always runs.

NOTE: this package may import ddpsim's foundation and data layers only -- ``ddpsim.trace.models``,
``trace``, ``capture``, ``plan``, ``curve_fit``, ``errors``, ``units`` and ``io`` (torch/stdlib
only) -- never ``ddpsim.cli``, the calibration fitting (``calibration``,
``interference_fit``), the cost models, the engine or ``validation`` (which launches it), and
never simpy, pandas, matplotlib, networkx or yaml. ``tests/test_layering.py`` holds the layers
and enforces them.
"""

MEASUREMENT_FORMAT = "ddpsim-measurement"
MEASUREMENT_VERSION = 1
CALIBRATION_FORMAT = "ddpsim-calibration"
CALIBRATION_VERSION = 1

__all__ = ["MEASUREMENT_FORMAT", "MEASUREMENT_VERSION", "CALIBRATION_FORMAT", "CALIBRATION_VERSION"]
