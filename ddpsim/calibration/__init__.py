"""A measured machine as a comm model: the calibration file (:mod:`~ddpsim.calibration.loader`),
its compute slowdown fitted to its DDP probe (:mod:`~ddpsim.calibration.interference_fit`)."""
