"""One module per CLI verb (see :mod:`ddpsim.cli.main`)."""
