"""``netbench.planning`` as a library: a validated request, ``plan(request, calibration)``, the command's JSON the same.

And the one step function: the step ``plan`` prices and the step a run's prediction prices are
:func:`netbench.model.step.training_step` with the same inputs, so they agree where the cluster is the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

# plan's autouse fixture that keeps the developer's calibration file out
from test_plan_cli import _no_user_calibration  # noqa: F401

from netbench.cli.app import main
from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration, read_calibration
from netbench.model.network import GraphModel
from netbench.model.schemes import SchemeSettings, build_scheme, scheme_from_config
from netbench.model.step import HostEffects, training_step
from netbench.model.view import cluster_scenario
from netbench.planning import PlanInputError, PlanRequest, plan, plan_inputs
from netbench.planning.request import OPTION_NAMES
from netbench.shapes import ParamShape
from netbench.tcp import STOCK_LINUX
from netbench.validation import one_line

CALIBRATION = Path(__file__).resolve().parent.parent / "reports" / "ci" / "calibration.json"


def _command_json(capsys, *args: str) -> dict:
    main(["plan", *args, "--calibration", str(CALIBRATION), "--json"])
    return json.loads(capsys.readouterr().out)


def _as_json(doc: dict) -> dict:
    return json.loads(json.dumps(doc))


def _schemes(*names: str, **settings) -> tuple:
    return tuple(build_scheme(n, SchemeSettings(**settings)) for n in names)


def test_the_library_prints_what_the_command_prints(capsys):
    """The command's --json is the library's document for the same inputs: gloo, a topology and a GPU backend."""
    calib = read_calibration(CALIBRATION)
    cases = [
        (
            ["-r", "full,dct", "--nodes", "2,8", "--bw", "1gbit", "--delay", "5ms", "--compute-ms", "50"],
            PlanRequest(schemes=_schemes("full", "dct"), nodes="2,8", bw="1gbit", delay="5ms", compute_ms=50),
        ),
        (
            ["-r", "diloco", "--topology", "sites", "--sites", "2", "--nodes", "8", "--compute-ms", "100"],
            PlanRequest(schemes=_schemes("diloco"), topology="sites", sites=2, nodes=[8], compute_ms=100),
        ),
    ]
    for args, request in cases:
        assert _as_json(plan(request, calib, CALIBRATION).doc) == _command_json(capsys, *args)
    gpu = ["--backend", "ideal", "--accelerator", "h100-sxm", "-G", "8", "--batch", "64", "--shapes", "llama-1b"]
    request = PlanRequest(
        backend="ideal", accelerator_name="h100-sxm", gpus_per_node=8, batch=64, shapes="llama-1b", nodes=(2, 4)
    )
    main(["plan", *gpu, "--nodes", "2,4", "--json"])
    assert _as_json(plan(request).doc) == json.loads(capsys.readouterr().out)


def test_the_document_says_what_each_count_counts():
    """Rows' ``nodes`` count workers (processes), ``machines`` the nodes they run on: the document says so."""
    request = PlanRequest(nodes=(2, 4), gpus_per_node=4, intra_bw="800gbit")
    doc = plan(request).doc
    assert doc["counts"]["nodes"].startswith("workers") and doc["counts"]["machines"].startswith("nodes")
    assert [(r["machines"], r["nodes"]) for r in doc["rows"]] == [(2, 8), (4, 16)]


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"bw": "5gbitx"}, "--bw: unknown rate unit"),
        ({"bw": "1bit"}, "--bw: must be between 1kbit"),
        ({"delay": "20s"}, "--delay: must be between 0ms and 10s"),
        ({"nodes": "0,4"}, "--nodes: must be whole numbers between 1 and 100000, got '0'"),
        ({"nodes": "1,4"}, "--nodes: gloo plans 2 nodes or more"),
        ({"gpus_per_node": 4}, "--intra-bw: needed with --gpus-per-node > 1"),
        ({"algorithm": "mesh"}, "--algorithm: choose from ring, tree, halving-doubling"),
        ({"backend": "nccl"}, "--backend nccl: name the GPUs with --accelerator"),
        ({"target_utilization": "1.5"}, "--target-utilization: each must be between 0 and 1"),
        ({"bucket_mb": 5000.0}, "--bucket-mb: must be between 0 and 4096"),
    ],
)
def test_a_bad_request_is_one_line_naming_the_option(fields, needle):
    with pytest.raises(pydantic.ValidationError) as exc:
        PlanRequest(**fields)
    text = one_line(exc.value, OPTION_NAMES)
    assert needle in text and "\n" not in text


def test_what_the_inputs_rule_out_is_a_plan_input_error():
    with pytest.raises(PlanInputError, match="--shapes: "):
        plan_inputs(PlanRequest(shapes="no-such-preset"))
    with pytest.raises(PlanInputError, match="--topology: a network graph is modelled with gloo's ring"):
        plan_inputs(PlanRequest(topology="sites", nodes=(4,), gpus_per_node=2, intra_bw="10gbit"))


@pytest.mark.parametrize("backend", ["nccl", "ideal"])
def test_a_gpu_plan_on_a_graph_names_the_sites_it_can_plan(backend):
    """A GPU backend refuses a topology file or sites without sharding, and says which sites it plans instead."""
    topology = str(Path(__file__).resolve().parents[1] / "scenarios" / "topologies" / "three_sites_asymmetric.toml")
    gpu = {"backend": backend, "accelerator_name": "h100-sxm"}
    for given in ({"topology": topology}, {"topology": "sites", "sites": 2, "nodes": (4,)}):
        with pytest.raises(PlanInputError) as exc:
            plan_inputs(PlanRequest(**gpu, **given))
        text = str(exc.value)
        assert text.startswith("--topology: ") and "--shard hsdp" in text and "--wan-bw" in text
    hsdp = PlanRequest(**gpu, topology="sites", sites=2, nodes=(4,), shard="hsdp")
    assert plan_inputs(hsdp).graphs == []  # planned: the WAN between the sites is the layout's


def test_automatic_buckets_are_sized_from_the_link():
    """``bucket_mb`` None sizes each pipelined replicator's buckets from the link; a number is taken as given."""
    auto = plan_inputs(PlanRequest(schemes=_schemes("dct"), bw="1gbit")).schemes[0].config.bucket_mb
    given = plan_inputs(PlanRequest(schemes=_schemes("dct"), bw="1gbit", bucket_mb=2.0)).schemes[0].config.bucket_mb
    assert auto > 0 and given == 2.0


def test_plan_and_a_run_price_the_step_with_one_function():
    """A plan's row is :func:`training_step` on the star without host effects; with the host's codec and burst credit
    passed in (what a run's prediction adds), the codec and the wire change and nothing else is re-derived."""
    shapes = [ParamShape("w", (512, 1024)), ParamShape("b", (1024,))]
    calib = Calibration()
    config = ReplicatorConfig(name="dct", bucket_mb=0.1)
    request = PlanRequest(
        schemes=(scheme_from_config(config),), nodes=(4,), bw="100mbit", delay="5ms", compute_ms=20, bucket_mb=0.1
    )
    row = plan(request, calib).doc["rows"][0]
    inputs = plan_inputs(request)
    scheme = inputs.schemes[0]
    star = GraphModel.uniform(4, 100e6, 100e6, 0.005)
    scenario = cluster_scenario(4, 100e6, 100e6, 0.005, 0.02, STOCK_LINUX, calib.framing())
    alone = training_step(star, scheme, inputs.shapes, scenario, calib, per_link=False).step
    assert row["step_time_s"] == pytest.approx(alone.step_time_s, rel=1e-12)
    host = HostEffects((0.01, 0.01), burst_credit_s=lambda tx_bytes, through: 0.0)
    on_host = training_step(star, scheme, shapes, scenario, calib, host=host, per_link=False).step
    assert on_host.compression_time_s == pytest.approx(0.02)
    credited = training_step(
        star, scheme, shapes, scenario, calib, host=HostEffects((0.01, 0.01), burst_credit_s=lambda b, through: 1.0)
    ).step
    assert credited.comm_time_s < on_host.comm_time_s  # the shaper's bucket lets the wire's first bytes through


@pytest.mark.parametrize("backend", [{}, {"backend": "ideal", "compute_ms": 100.0, "target_utilization": "0.5,0.9"}])
def test_a_plan_without_derived_answers_has_the_same_rows_and_utilisation_answers(backend):
    request = PlanRequest(shapes="gpt2-small:blocks=2", nodes=(2, 4), **backend)
    calibration = read_calibration(CALIBRATION) if not backend else None
    whole = plan(request, calibration).doc
    lean = plan(request, calibration, derived=False).doc
    assert "derived" in whole and "derived" not in lean
    assert lean == {k: v for k, v in whole.items() if k != "derived"}
