"""What a collective or a kernel costs on a machine: topologies as networkx graphs, NCCL's
channel search and cost model (src/graph/search.cc, src/graph/tuning.cc), gloo's, the comm-model
interface the engine reads, and the GPU kernel, contention and host-side costs -- pure functions
of plain numbers."""
