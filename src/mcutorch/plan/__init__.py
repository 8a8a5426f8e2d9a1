"""Memory planning: the compiler's buffers (`buffers.py`) and the planner (`planner.py`).

    from mcutorch.plan import Buffer, Region, plan
    result = plan(buffers, num_ops, regions)     # offsets per buffer, or PlanError with the map
"""
from mcutorch.plan.planner import Buffer, Plan, Region, lower_bound, plan
from mcutorch.plan.regions import parse_memory

__all__ = ["Buffer", "Plan", "Region", "lower_bound", "parse_memory", "plan"]
