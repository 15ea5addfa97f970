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
* :mod:`executor.profile_step` -- a model under real DDP recorded by torch.profiler, one trace per
  rank (what ``ddpsim trace --from-profile`` and ``ddpsim compare`` read).

Lifecycle (:mod:`executor.runtime`): torchrun's environment is validated first, the process
group is created with an explicit timeout, a watchdog ends a rank that makes no progress
within the timeout (a dead peer), and ``destroy_process_group()`` always runs.

Imports: this package runs on a node with torch (and the standard library) only. From ddpsim
it imports the foundation (:mod:`ddpsim.errors`, :mod:`ddpsim.units`, :mod:`ddpsim.io`), the
formats of the files it writes and how their figures are read (:mod:`ddpsim.formats`), the
trace layer (:mod:`ddpsim.trace.records`, :mod:`ddpsim.trace.capture`,
:mod:`ddpsim.trace.models`), the plan layer (:mod:`ddpsim.plan.planner`) and one module of the
network layer, :mod:`ddpsim.network.curve_fit` (the all-reduce curve the collectives step fits
to its own points) -- never the other network modules, the engine, the calibration layer,
the pipeline, reports, validation or the CLI, and never simpy, pandas, matplotlib, networkx or
yaml. ddpsim never imports this package: :mod:`ddpsim.validation.launch` runs it as a program
under torchrun and reads the files it writes. ``tests/test_layering.py`` and
``tests/test_executor_lifecycle.py`` enforce both.
"""
