"""A measured machine as a comm model: the executor's calibration file read into curves,
interference and copy bandwidth (:mod:`~ddpsim.calibration.loader`), and the compute slowdown
fitted from its DDP probe by simulating it (:mod:`~ddpsim.calibration.interference_fit`)."""
