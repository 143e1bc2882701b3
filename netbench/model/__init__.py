"""Analytic wall-clock model of a training step: collectives, framing, payloads, calibration.

Small modules, one job each:

* :mod:`~netbench.model.framing` -- TCP/Ethernet/gloo framing: payload bytes to wire bytes;
* :mod:`~netbench.model.collectives` -- alpha-beta cost of ring/tree/halving-doubling collectives;
* :mod:`~netbench.model.gloo_tcp` -- what a gloo ring call costs over TCP on a delayed link (segments,
  two in flight, ready-to-receive handshake, window, slow start after idle, bbr's pacing);
* :mod:`~netbench.model.exchange` -- the ``Exchange`` record every scheme's traffic is made of;
* :mod:`~netbench.model.schemes` -- which exchanges each replicator makes (payload formulas are the
  declarations' in :mod:`netbench.declarations`, never re-derived here);
* :mod:`~netbench.model.steptime` -- the scenario a step runs in, one exchange's cost on a link, the step's record;
* :mod:`~netbench.model.network` -- compute + compression + communication on a network graph
  (a uniform star in closed form);
* :mod:`~netbench.model.step` -- the training step, the one function ``plan`` and a run's prediction call: the
  overlap rules applied, the host's own effects passed in;
* :mod:`~netbench.model.view` -- the model's scenario for a run's cluster or a plan's request;
* :mod:`~netbench.model.calibration` -- host constants (measured by :mod:`netbench.calibrate`), saved as JSON;
* :mod:`~netbench.model.planner` -- derived answers solved numerically (bracketed searches,
  :mod:`~netbench.model.search`).
"""

from netbench.model.calibration import Calibration, save_calibration

__all__ = ["Calibration", "save_calibration"]
