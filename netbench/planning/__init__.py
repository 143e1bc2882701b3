"""``plan`` as a library: a validated :class:`PlanRequest` and :func:`plan`, the analytic model's answers for it.

* :mod:`~netbench.planning.request` -- the request, every value checked (one line naming the option);
* :mod:`~netbench.planning.inputs` -- the request resolved: shapes, network graphs, replicators with buckets sized;
* :mod:`~netbench.planning.plan` -- :func:`plan`, the document ``netbench plan --json`` prints;
* :mod:`~netbench.planning.graphs` -- the step on a network graph, what sets it, the WAN questions;
* :mod:`~netbench.planning.gpu` -- the GPU backends, an accelerator's compute and the utilisation answers.

Like :mod:`netbench.model`, which it drives, it imports no emulator, orchestrator, pandas or torch.
"""

from netbench.planning.inputs import PlanInputError, plan_inputs
from netbench.planning.plan import PlanResult, plan
from netbench.planning.request import PlanRequest

__all__ = ["PlanRequest", "PlanInputError", "PlanResult", "plan", "plan_inputs"]
