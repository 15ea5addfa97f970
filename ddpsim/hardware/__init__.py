"""The hardware catalogue: GPUs and node layouts as data (``catalogue.yaml``), each figure with its source."""
