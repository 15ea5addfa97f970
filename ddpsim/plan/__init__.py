"""DDP's bucket plan for a trace: the assignment of torch's
``_compute_bucket_assignment_by_size``, the construction and rebuilt layouts, and plan files
(:mod:`~ddpsim.plan.planner`)."""
