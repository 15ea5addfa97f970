"""``ddpsim validate``: predicted versus measured iteration time, point by point.

Three modules, in the order of the data: :mod:`~ddpsim.validation.measure` (calibrate once with
``executor collectives``, run every point under real DDP with local gloo ranks ``--repeats``
times round-robin, each round capturing the trace in lockstep on all ranks, then once more with a
timing hook for per-bucket times; predict the same points from the pooled captures),
:mod:`~ddpsim.validation.compare` (errors, statistics, the best-cap verdict from the runs paired
by round) and :mod:`~ddpsim.validation.writer` (csv, json, markdown, figures, rewritten after
every run, with every raw measurement under ``reports/<scenario>/validation/``). A point's
measured figure is the mean of its runs' pooled steady-state step times (what adds up to a job's
wall time, and the statistic the calibration's curves are), its prediction the simulated steady
steps' mean; the medians are kept beside them. The trace must be captured under the runs'
conditions (model, batch size, threads per rank). How each figure is made and read:
docs/VALIDATION.md.
"""
