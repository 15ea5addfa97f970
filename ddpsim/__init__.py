"""ddpsim: predict PyTorch DistributedDataParallel training speed, bucket by bucket.

Trace a real model (:mod:`ddpsim.trace.capture`), plan DDP's buckets exactly (:mod:`ddpsim.plan.planner`),
model the machine (:mod:`ddpsim.network.topology`, :mod:`ddpsim.network.collective_cost`), simulate the Reducer
in SimPy (:mod:`ddpsim.engine.simulate`), sweep and report (:mod:`ddpsim.api`), and validate on real
hardware with the companion ``executor`` package (:mod:`ddpsim.validation`).

Imports point one way, down the pipeline (``tests/test_layering.py`` holds the layers and
enforces them): foundation (``errors``, ``units``, ``io``) < data (``trace``, ``plan``,
``capture``, ``models``, ``curve_fit``, ...) < cost models (``topology``, ``nccl``, ``gloo``,
``comm_model``, ``collectives``) < ``engine`` < calibration fitting (``interference_fit``,
``calibration``) < pipeline (``scenario``, ``sweep``, ``report``, ``api``, ...) <
``validation`` < the CLI (``cli``, ``commands``). The executor imports foundation and data only.
"""

__version__ = "0.1.0"
