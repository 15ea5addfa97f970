"""``ddpsim validate``: predicted versus measured iteration time, point by point.

Three modules, in the order of the data: :mod:`~ddpsim.validation.measure` (calibrate, run the
executor, predict; :func:`~ddpsim.validation.measure.validate`, :func:`~ddpsim.validation.measure.reanalyze`),
:mod:`~ddpsim.validation.compare` (errors, statistics, verdicts) and :mod:`~ddpsim.validation.writer`
(csv, json, markdown, figure).

For a scenario (the same YAML ``ddpsim run`` reads; its ``validation`` block says what to
run for real), :func:`~ddpsim.validation.measure.validate`:

1. calibrates the machine once with ``executor collectives`` (all-reduce/broadcast curves,
   compute/comm interference, copy bandwidth) or reuses ``--calibration FILE``;
2. runs every validated point (local torchrun, gloo on CPUs) ``--repeats`` times, round-robin
   over the points so slow drift of a shared machine hits every point alike, each round's
   order rotated by one (:func:`~ddpsim.validation.measure.round_order`), WITHOUT a comm hook (the iteration time that is
   compared). By default (``--launch point``) each round's trace is captured by ``executor
   trace`` in a launch of its own and each point runs in ``executor ddp`` launches of its own.
   With ``--launch round`` a round is ONE launch (``executor round``): before each point a
   slice of the trace (:data:`~ddpsim.validation.measure.ROUND_TRACE_ITERS` lockstep steps), then the point under a fresh
   real DDP over the same module, so that the trace and the runs share the launch's speed and
   the moment. Then each point runs once more with the timing hook for per-bucket all-reduce
   times (a hook changes DDP's division path, so those runs are not used for the iteration
   time);
3. simulates the same points (``scenario.build_point`` + :func:`ddpsim.engine.simulate.simulate`)
   with the calibration's comm curves, interference and copy bandwidth, from the trace
   captured on all ranks at once, in lockstep (a barrier before every step and before its
   optimizer, as DDP's ranks run), in every round (the rounds' traces pooled), so that the
   trace sees the same load drift as the runs;
4. writes ``reports/<scenario>/validation.csv`` / ``.md`` / ``.json`` / ``.png``
   atomically, rewritten as each run completes, and every raw measurement under
   ``reports/<scenario>/validation/``.

Measured figures of a point pool the steady-state step times (per iteration, the mean over
ranks: ``ddpsim.formats.step_times``) of all its repeated runs: ``measured_s`` is their MEAN,
``measured_p10_s``/``p90_s`` the noise band; ``predicted_s`` is the simulated steady steps' mean
(``SimResult.summary()['iteration_mean_s']``). ``error_pct = 100 * (predicted - measured) / measured``.
The mean is compared because it is what adds up to a job's wall time (steps x mean step), and
because it is the statistic the calibration's costs are: every collective curve is the mean of
its samples (a median jumps between the two regimes of a bimodal CPU all-reduce), so the
engine predicts a mean step. A step dominated by ONE such all-reduce (the small mlp's) has a
median far from its mean (docs/VALIDATION.md, "What the figures mean"). The medians
are kept beside it (``measured_median_s``, ``predicted_p50_s``, ``error_p50_pct``).

The best-cap criterion (the predicted-best cap measured within 2 % of the measured best) is
also tested on the runs themselves: run k of every point ran in round k, so the two points'
runs pair by round, and :func:`~ddpsim.validation.compare.paired_gap_ci_pct` gives the 95 % interval of the gap from
their log ratios; :func:`~ddpsim.validation.compare.best_cap_verdict` says whether that interval decides the criterion
(``summary.best_cap_verdict``: met, missed or unresolved; per-run means in ``run_means_s``).

NOTE: the trace used for prediction must be captured under the run's conditions (same
model, batch size, threads per rank): a CPU trace captured with ``--num-threads 1`` is
validated with one thread per rank.
"""
