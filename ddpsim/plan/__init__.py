"""DDP's bucket plans: eager (:mod:`~ddpsim.plan.planner`: torch's bucket assignment, construction
and rebuilt layouts, plan files) and under ``torch.compile`` (:mod:`~ddpsim.plan.compiled`)."""
