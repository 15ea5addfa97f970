"""A scenario file to simulations of its points: scenarios, the one builder of each point's
inputs (:func:`ddpsim.pipeline.inputs.build_point_inputs`), sweeps, recommended bucket plans,
trace-noise resampling and the method's measured error."""
