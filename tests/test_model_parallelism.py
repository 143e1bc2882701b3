"""Parallel layouts in the GPU planner: tensor, pipeline and sharded data parallelism (netbench.model.parallelism)."""

import pydantic
import pytest
from test_plan_cli import _no_user_calibration, plan_error, plan_json  # noqa: F401

from netbench.cli.app import main
from netbench.model.backends import CodecCost, IdealBackend, NcclBackend
from netbench.model.compute import model_shape
from netbench.model.parallelism import Layout, bubble_fraction, layout_step, prefetched
from netbench.model.schemes import SchemeSettings, build_scheme, shape_key
from netbench.model.steptime import Scenario
from netbench.planning import PlanInputError, PlanRequest, plan, plan_inputs
from netbench.shapes import resolve_shapes

LLAMA_1B = "llama-1b"
GPU = ["--backend", "nccl", "--accelerator", "h100-sxm", "--transport", "rdma", "-G", "8", "--bw", "3200gbit"]
FULL = build_scheme("full", SchemeSettings())


def _scenario(nodes: int, g: int = 8, compute_s: float = 1.0, bw: float = 3.2e12) -> Scenario:
    return Scenario(
        workers=nodes * g, gpus_per_node=g, intra_bits_per_s=450e9 * 8, up_bps=bw, down_bps=bw, compute_s=compute_s
    )


def _backend(kind=IdealBackend, layout: Layout = Layout(), tokens: float = 2**20):
    shapes = shape_key(resolve_shapes(LLAMA_1B))
    return kind(shapes=shapes, model=model_shape(shapes), codec=CodecCost(None), layout=layout, tokens_per_step=tokens)


def _free(kind: str, nbytes: float, ranks: int, per_node: int) -> float:
    return 0.0


@pytest.mark.parametrize("pp, m, v", [(2, 1, 1), (4, 8, 1), (16, 32, 1), (8, 16, 2)])
def test_the_bubble_is_pp_minus_one_over_the_slots(pp, m, v):
    layers = [100] * (pp * v * 2)
    lay = Layout(pp=pp, microbatches=m, virtual_stages=v)
    step = layout_step(lay, _scenario(pp, g=1), layers, 64, 1.0, 4, _free)  # activations of a token: no transfer time
    assert bubble_fraction(pp, m, v) == pytest.approx((pp - 1) / (v * m + pp - 1))
    assert step.bubble_s / step.pipeline_s == pytest.approx(bubble_fraction(pp, m, v))
    assert step.compute_s == 1.0 and step.tp_s == 0 and step.shard_s == 0


def test_more_microbatches_shrink_the_bubble_and_no_pipeline_has_none():
    layers = [100] * 32
    one = layout_step(Layout(), _scenario(2), layers, 64, 1e6, 4, _free)
    assert one.bubble_s == 0 and one.step_s == pytest.approx(1.0)
    few, many = (layout_step(Layout(pp=4, microbatches=m), _scenario(4), layers, 64, 1e6, 4, _free) for m in (4, 64))
    assert many.step_s < few.step_s


def test_a_gather_prefetched_one_layer_ahead_hides_all_but_the_first():
    assert prefetched([1.0, 1.0, 1.0], [0.5, 0.5, 0.5]) == pytest.approx(0.5)
    # slower than compute: a + (L - 1) max(a, c) + c - L c
    assert prefetched([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]) == pytest.approx(2 + 2 * 2 + 1 - 3)
    # a reduce-scatter after the last layer is left exposed
    assert prefetched([1.0, 1.0], [0.0, 0.0], [0.25, 0.25]) == pytest.approx(0.25)


def test_zero3_moves_three_halves_of_ddps_bytes_zero1_and_zero2_the_same():
    scenario = _scenario(2)
    plain = _backend().step(FULL, scenario)
    ddp_bytes = plain.wire.tx.payload
    for shard, ratio in (("zero1", 1.0), ("zero2", 1.0), ("zero3", 1.5)):
        backend = _backend(layout=Layout(shard=shard))
        parts = backend.layout_parts(FULL, scenario)
        assert parts["shard_group"] == 16 and parts["replicas"] == 1
        assert (parts["shard_gather_bytes"] + parts["shard_reduce_bytes"]) / ddp_bytes == pytest.approx(ratio, rel=1e-3)
        # the gathers are where zero3 adds: forward and backward
        gathers = 2.0 if shard == "zero3" else 1.0
        assert parts["shard_gather_bytes"] / parts["shard_reduce_bytes"] == pytest.approx(gathers)


def test_sharding_that_hides_behind_compute_costs_nothing_and_shows_on_a_slow_network():
    hidden = _backend(layout=Layout(shard="zero3")).step(FULL, _scenario(2, compute_s=10.0))
    assert hidden.step_time_s == pytest.approx(10.0, rel=0.01)
    slow = _backend(layout=Layout(shard="zero3")).step(FULL, _scenario(2, compute_s=10.0, bw=1e9))
    assert slow.step_time_s > 12.0


def test_tensor_parallelism_is_four_all_reduces_a_layer_and_micro_batch_on_the_critical_path():
    calls = []

    def price(kind, nbytes, ranks, per_node):
        calls.append((kind, nbytes, ranks, per_node))
        return 1e-3

    layers, m, tokens, width = [1000] * 16, 4, 2**20, 2048
    step = layout_step(Layout(tp=8, pp=2, microbatches=m), _scenario(4), layers, width, tokens, 4, price)
    dp = 32 // 16
    assert calls[0] == ("all_reduce", tokens / (dp * m) * width * 2, 8, 8)
    assert step.tp_s == pytest.approx(4 * (16 / 2) * m * 1e-3)
    assert step.tp_bytes == pytest.approx(4 * 8 * m * 2 * 7 / 8 * tokens / (dp * m) * width * 2)
    none = layout_step(Layout(pp=2, microbatches=m), _scenario(4), layers, width, tokens, 4, price)
    assert none.tp_s == 0 and none.tp_bytes == 0


def test_memory_per_gpu_divides_by_the_shard_group_and_the_model_parallel_slices(capsys):
    args = [*GPU, "--shapes", LLAMA_1B, "--nodes", "1", "--batch", "16", "-r", "full"]
    plain = plan_json(capsys, *args)["rows"][0]["memory"]
    zero1 = plan_json(capsys, *args, "--shard", "zero1")["rows"][0]["memory"]
    zero3 = plan_json(capsys, *args, "--shard", "fsdp")["rows"][0]["memory"]
    tp = plan_json(capsys, *args, "--tp", "8")["rows"][0]["memory"]
    assert zero1["state_bytes"] == pytest.approx(plain["state_bytes"] / 8)
    assert zero1["weights_and_gradients_bytes"] == plain["weights_and_gradients_bytes"]
    assert zero3["weights_and_gradients_bytes"] == pytest.approx(plain["weights_and_gradients_bytes"] / 8)
    assert tp["weights_and_gradients_bytes"] == pytest.approx(plain["weights_and_gradients_bytes"] / 8)


def test_plain_layout_prices_as_data_parallelism():
    scenario = _scenario(2)
    assert Layout().plain and not Layout(shard="zero1").plain
    ours = _backend(NcclBackend).step(FULL, scenario)
    assert _backend(NcclBackend).layout_parts(FULL, scenario) is None
    assert ours.step_time_s > 0


def test_hsdp_shards_inside_a_node_and_runs_the_replicator_between_nodes(capsys):
    args = [*GPU, "--shapes", LLAMA_1B, "--nodes", "4", "--batch", "64", "--shard", "hsdp", "--bw", "10gbit"]
    doc = plan_json(capsys, *args, "-r", "full,diloco", "--sync-every", "50")
    rows = {r["replicator"]: r for r in doc["rows"]}
    for r in rows.values():
        assert r["parallel"]["shard_group"] == 8 and r["parallel"]["replicas"] == 4
    # a dense all-reduce of the node's shards every step, against diloco's every 50 steps
    assert rows["full"]["parallel"]["replicator_exposed_s"] > rows["diloco"]["parallel"]["replicator_exposed_s"]
    two = plan_json(capsys, *args, "-r", "full", "--shard-nodes", "2")["rows"][0]["parallel"]
    assert two["shard_group"] == 16 and two["replicas"] == 2


def test_one_node_of_eight_gpus_is_planned_and_gloo_still_needs_two(capsys):
    doc = plan_json(capsys, *GPU, "--shapes", LLAMA_1B, "--nodes", "1", "--batch", "16", "-r", "full")
    assert doc["rows"][0]["machines"] == 1 and doc["rows"][0]["nodes"] == 8
    assert "--nodes" in plan_error(capsys, "--nodes", "1")


def test_the_text_names_the_layout_and_where_the_step_goes(capsys):
    main(["plan", *GPU, "--shapes", LLAMA_1B, "--nodes", "4", "--batch", "64", "--tp", "8", "--pp", "4", "-r", "full"])
    out = capsys.readouterr().out
    assert "layout: tensor parallel 8 inside a node; 4 pipeline stages (1F1B, 4 micro-batches)" in out
    assert "bubble" in out and "tensor parallel" in out


@pytest.mark.parametrize(
    "args, option",
    [
        (["--tp", "2"], "--tp"),  # gloo
        ([*GPU, "--tp", "3"], "--tp"),
        ([*GPU, "--pp", "3", "--nodes", "4"], "--pp"),
        ([*GPU, "--shard-nodes", "2"], "--shard-nodes"),
        ([*GPU, "--shard", "zero4"], "--shard"),
        ([*GPU, "--virtual-stages", "2"], "--virtual-stages"),
        ([*GPU, "--shard", "zero3", "-r", "diloco"], "--shard"),
        ([*GPU, "--shard", "hsdp", "--shard-nodes", "3", "--nodes", "4"], "--shard-nodes"),
        ([*GPU, "--pp", "64", "--nodes", "64", "--shapes", "llama-1b"], "--pp"),
    ],
)
def test_layouts_that_cannot_be_planned_are_one_line_naming_the_option(capsys, args, option):
    batch = [] if "--batch" in args else ["--batch", "64"]
    assert option in plan_error(capsys, *args, *batch)


def test_models_to_two_trillion_parameters_and_clusters_to_100k_gpus():
    request = PlanRequest(
        schemes=(FULL,), params="1.8e12", layers=128, nodes=(12288,), gpus_per_node=8, backend="nccl",
        accelerator_name="h100-sxm", transport="rdma", bw="3200gbit", tokens_per_step="3.2e7", seq_len=8192,
        tp=8, pp=16, microbatches=64, shard="zero2",
    )  # fmt: skip
    row = plan(request, inputs=plan_inputs(request)).doc["rows"][0]
    assert row["nodes"] == 98304 and row["parallel"]["data_parallel"] == 768
    assert 0 < row["compute_utilization"] < 1


def test_request_checks_the_layout_against_every_cluster():
    base = dict(backend="nccl", accelerator_name="h100-sxm", gpus_per_node=8, batch=64)
    PlanRequest(**base, nodes=(2, 4), tp=8, pp=2)
    with pytest.raises(pydantic.ValidationError, match="--tp x --pp"):
        PlanRequest(**base, nodes=(2, 3), tp=8, pp=2)
    with pytest.raises(PlanInputError, match="--shard zero2"):
        plan_inputs(PlanRequest(**base, shard="zero2", schemes=(build_scheme("diloco", SchemeSettings()),)))


def test_hsdp_across_sites_runs_the_replicator_on_the_wan(capsys):
    args = [*GPU, "--shapes", LLAMA_1B, "--nodes", "8", "--batch", "64", "--shard", "hsdp", "--topology", "sites"]
    doc = plan_json(
        capsys,
        *args,
        "--sites",
        "2",
        "--wan-bw",
        "10gbit",
        "--wan-delay",
        "20ms",
        "-r",
        "full,diloco",
        "--sync-every",
        "100",
    )
    assert doc["layout"]["sites"] == 2 and doc["layout"]["wan_bps"] == 10e9 and doc["layout"]["wan_delay_s"] == 0.02
    rows = {r["replicator"]: r["parallel"] for r in doc["rows"]}
    assert rows["full"]["shard_group"] == 32 and rows["full"]["replicas"] == 2
    # every step's dense all-reduce of the model crosses the 10 Gbit/s WAN: fp32 weights' bytes over it at least
    params = doc["params"]
    assert rows["full"]["replicator_exposed_s"] > params * 4 * 8 / 10e9 * 0.9
    assert rows["diloco"]["replicator_exposed_s"] < rows["full"]["replicator_exposed_s"] / 10
    faster = plan_json(capsys, *args, "--sites", "2", "--wan-bw", "100gbit", "-r", "full")["rows"][0]["parallel"]
    assert faster["replicator_exposed_s"] < rows["full"]["replicator_exposed_s"] / 5
    assert "--shard-nodes" in plan_error(capsys, *args, "--shard-nodes", "2")
    assert "--topology" in plan_error(capsys, *GPU, "--batch", "64", "--topology", "sites")
    assert "--racks" in plan_error(capsys, *args, "--racks", "2")
    assert "--rank-order" in plan_error(capsys, *args, "--rank-order", "interleaved")
