"""The names of a topology graph's node and edge attributes, the only place they are spelled,
and what each means (:mod:`ddpsim.network.topology` builds the graphs)."""

# --- nodes ---
KIND = "kind"  # one of topology_schema.NODE_KINDS
HOST = "host"  # index of the host the element belongs to; the fabric's switches: -1
LOCAL_RANK = "local_rank"  # devices: index of the device on its host
DEVICE_MODEL = "device_model"  # devices: e.g. "A100-SXM4-80GB"
MEMORY_BANDWIDTH = "memory_bandwidth_bytes_per_s"  # devices: used for gradient copy-in/out
COMPUTE_CAPABILITY = "compute_capability"  # GPUs: 80 (Ampere), 90 (Hopper); CPU ranks: 0
SM_COUNT = "sm_count"  # GPUs: streaming multiprocessors, what NCCL's blocks take (network.contention)
REDUCE_BANDWIDTH = "reduce_bandwidth_bytes_per_s"  # CPU ranks: bytes/s one rank sums (gloo's reduction)
NVLS = "nvls"  # NVSwitch: True when it reduces in the switch (NVLink SHARP)
RAIL = "rail"  # NICs: the NIC's index on its host
# --- edges ---
BANDWIDTH = "bandwidth_bytes_per_s"  # usable bandwidth per direction (> 0)
LATENCY = "latency_s"  # one-way latency of the link (>= 0)
# one of topology_schema.LINK_TYPES; "sys" joins two CPU sockets (NCCL topo.h inter-CPU figures:
# Intel Broadwell 6, Skylake 10, Sapphire Rapids 22, Emerald Rapids 40, AMD 16, Arm 6 GB/s)
LINK_TYPE = "link_type"
NUM_LINKS = "num_links"  # NVLink edges: NVLinks bundled in the edge
# graph attributes: name, backend (one of BACKENDS), num_nodes, cpu_vendor ("intel" | "amd";
# NCCL's tuning depends on it), description

DEVICE_KINDS = ("gpu", "cpu")
BACKENDS = ("nccl", "gloo")
