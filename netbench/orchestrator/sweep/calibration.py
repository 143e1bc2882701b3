"""Which model constants a sweep's predictions use, measuring them first when the scenario asks.

A scenario with ``calibrate = true`` measures this host (``netbench calibrate``'s measurement) on
the scenario's own parameter shapes and replicator settings, once, into the sweep folder: the
compression cost per parameter depends on the shapes. Otherwise the sweep uses ``--calibration``
or this host's cached calibration, measured first when there is none
(:func:`netbench.calibrate.hostcache.host_calibration`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from netbench import safe_files
from netbench.calibrate import measure as measuring
from netbench.calibrate.hostcache import HostCalibration, host_calibration, load_calibration
from netbench.calibrate.measure import MeasureOptions
from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import save_calibration
from netbench.model.schemes import SchemeSettings
from netbench.orchestrator.prediction import workload_shapes
from netbench.orchestrator.sweep.scenario import SweepScenario
from netbench.rundir.sweepdir import CALIBRATION

if TYPE_CHECKING:
    from netbench.calibrate.measure import Forker

__all__ = ["CALIBRATION", "sweep_calibration"]


def _shapes_spec(scenario: SweepScenario, out: Path) -> str:
    """A shapes spec ``netbench calibrate`` accepts: the preset itself, or a JSON file of the built model's shapes."""
    if scenario.workload.kind == "shapes":
        return scenario.workload.shapes
    shapes = workload_shapes(scenario.workload, max(scenario.grid.nodes))
    path = out / "shapes.json"
    safe_files.write_text(
        path, json.dumps({"shapes": {s.name: list(s.shape) for s in shapes}}, indent=1) + "\n"
    )  # never through a link
    return str(path.resolve())  # the measuring processes start in a folder of their own: a relative --out misleads


def sweep_calibration(
    scenario: SweepScenario,
    out: Path,
    explicit: Path | None,
    fresh: bool,
    on_measure: Callable[[Path], None] | None = None,
    replicators: Sequence[ReplicatorConfig] = (),
    fork: Forker | None = None,
) -> HostCalibration:
    """The calibration every point predicts with. Measures into ``out/calibration.json`` when the scenario asks and none
    is there.

    ``replicators``: the points' settings; this host's cache entry gets their encode/decode costs measured when it
    lacks them. ``fork``: how the scenario's measuring processes start (the sweep's worker fork server); default:
    spawned.
    """
    if explicit is not None or not scenario.calibrate:
        return host_calibration(explicit, on_measure=on_measure, replicators=replicators)
    target = out / CALIBRATION
    if target.exists() and not fresh:
        return HostCalibration(load_calibration(target), target, False, "file")

    known = set(SchemeSettings.model_fields)
    settings = SchemeSettings(**{k: v for k, v in scenario.replicator.items() if k in known})
    # 10 timed steps per scheme, not calibrate's 3: a mean of 3 swings by 2x while the host is busy
    opts = MeasureOptions(
        shapes=_shapes_spec(scenario, out), schemes=tuple(scenario.grid.replicator), settings=settings, steps=10
    )
    if on_measure:
        on_measure(target)
    save_calibration(measuring.measure(opts, fork), target)
    return HostCalibration(load_calibration(target), target, True, "measured")
