"""The simulation: DDP's Reducer (torch/csrc/distributed/c10d/reducer.cpp) in SimPy, the only
SimPy code of ddpsim. :func:`ddpsim.engine.simulate.simulate` takes a trace, a bucket plan, a comm
model and a :class:`~ddpsim.engine.config.SimConfig` and returns a :class:`~ddpsim.engine.result.SimResult`;
docs/MODEL.md says what it models."""
