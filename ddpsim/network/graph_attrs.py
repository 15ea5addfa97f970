"""The names of a topology graph's node and edge attributes, the only place they are spelled
(what each means: :mod:`ddpsim.network.topology`)."""

KIND = "kind"
HOST = "host"
LOCAL_RANK = "local_rank"
DEVICE_MODEL = "device_model"
MEMORY_BANDWIDTH = "memory_bandwidth_bytes_per_s"
COMPUTE_CAPABILITY = "compute_capability"
SM_COUNT = "sm_count"
REDUCE_BANDWIDTH = "reduce_bandwidth_bytes_per_s"
NVLS = "nvls"
RAIL = "rail"
BANDWIDTH = "bandwidth_bytes_per_s"
LATENCY = "latency_s"
LINK_TYPE = "link_type"
NUM_LINKS = "num_links"

DEVICE_KINDS = ("gpu", "cpu")
BACKENDS = ("nccl", "gloo")
