"""Named parameter-shape presets and shapes files.

A *shape list* is what both the replicators' payload formulas and the analytic model consume: the
ordered list of (name, shape) of a model's parameters. Presets let users study realistic model
sizes without instantiating them (the shapes workload of `netbench run`, and `netbench plan`).

Spec strings accepted by :func:`resolve_shapes`:

* ``gpt2-small`` / ``gpt2-medium`` / ``gpt2-large`` (optionally ``:blocks=2`` to keep only the
  first transformer blocks, no embeddings: ``gpt2-small:blocks=2`` is the 14.2 M-parameter
  benchmark used throughout netbench);
* ``llama:d_model=2048,layers=16,ffn=5632,vocab=32000[,heads=16,kv_heads=16,tied=0]`` and the
  named sizes ``llama-1b``, ``llama-7b``;
* a path to a JSON file: ``{"shapes": {"name": [d0, d1, ...], ...}}`` or ``[[d0, d1], [d0], ...]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from netbench import untrusted

__all__ = [
    "ParamShape",
    "ShapeError",
    "resolve_shapes",
    "gpt2_shapes",
    "llama_shapes",
    "PRESETS",
    "total_params",
    "MAX_PARAMS",
    "MAX_PLANNED_PARAMS",
    "MAX_TENSORS",
    "MAX_DIMS",
    "check_param_count",
    "check_tensor_count",
]

# The one cap on a model's size, wherever one is typed (presets, llama:..., shapes files, --params,
# the built-in workloads' dimensions): 1e11 covers every model netbench plans for (llama-7b is
# 6.7e9) and stops a typo (3.4e11 parameters) before anything is built. Whether a run's nodes
# can also *hold* that many parameters is the run's own check (RunConfig, against memory).
MAX_PARAMS = 100_000_000_000
# The GPU planner's cap (plan with --backend nccl or ideal): it prices clusters, not this host, and the largest
# published runs train about 1e12 parameters (Llama 3's largest 4.05e11); it stops a typo of 3.4e13.
MAX_PLANNED_PARAMS = 2_000_000_000_000
MAX_TENSORS = 100_000  # llama-7b has 291 tensors; a list longer than this is built from a typo, not a model
MAX_DIMS = 16  # dimensions of one tensor (torch allows 64; models use up to 5)
MAX_SHAPES_FILE_BYTES = untrusted.SHAPES.max_bytes


class ShapeError(ValueError):
    """A shapes preset or file cannot be used.

    ``str()`` quotes the spec the user typed; :attr:`unquoted` says the same without the spec or its values, for a
    spec read from a file someone else wrote (whose values a message never echoes).
    """

    def __init__(self, message: str, unquoted: str | None = None) -> None:
        super().__init__(message)
        self.unquoted = message if unquoted is None else unquoted


def check_param_count(count: float, what: str, cap: int = MAX_PARAMS) -> int:
    """``count`` as an int, or ShapeError unless it is a whole number from 1 to ``cap`` (the one check)."""
    number = isinstance(count, int) or (isinstance(count, float) and math.isfinite(count))
    if number and 1 <= count <= cap:
        return int(count)
    if number and count > cap:  # an int may be too large for a float: never formatted as one
        raise ShapeError(f"{what}: more than {cap:.0e} parameters (at most {cap:.0e})")
    raise ShapeError(
        f"{what}: {count:.3g} parameters is out of range (1 to {cap:.0e})"
        if number
        else f"{what}: {count!r} is not a parameter count"
    )


def check_tensor_count(count: int, what: str) -> None:
    """ShapeError when a shape list would hold more than MAX_TENSORS tensors (checked before the list is built)."""
    if count > MAX_TENSORS:
        raise ShapeError(f"{what}: {count} tensors, more than the {MAX_TENSORS} a model may have")


@dataclass(frozen=True)
class ParamShape:
    """One parameter tensor: its name and shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


_GPT2_SIZES = {"gpt2-small": (768, 12), "gpt2-medium": (1024, 24), "gpt2-large": (1280, 36)}
_LLAMA_SIZES = {
    "llama-1b": dict(d_model=2048, layers=16, ffn=8192, vocab=128256, heads=32, kv_heads=8, tied=1),
    "llama-7b": dict(d_model=4096, layers=32, ffn=11008, vocab=32000, heads=32, kv_heads=32, tied=0),
}
PRESETS: tuple[str, ...] = (*_GPT2_SIZES, *_LLAMA_SIZES, "llama")


def gpt2_shapes(
    d_model: int, layers: int, vocab: int = 50257, n_ctx: int = 1024, embeddings: bool = True
) -> list[ParamShape]:
    """GPT-2 parameter shapes as in the reference implementation (Conv1D weights are (in, out))."""
    check_tensor_count(12 * layers + 4, "gpt2")
    shapes: list[ParamShape] = []
    if embeddings:
        shapes += [ParamShape("wte.weight", (vocab, d_model)), ParamShape("wpe.weight", (n_ctx, d_model))]
    for i in range(layers):
        p = f"h.{i}."
        shapes += [
            ParamShape(p + "ln_1.weight", (d_model,)),
            ParamShape(p + "ln_1.bias", (d_model,)),
            ParamShape(p + "attn.c_attn.weight", (d_model, 3 * d_model)),
            ParamShape(p + "attn.c_attn.bias", (3 * d_model,)),
            ParamShape(p + "attn.c_proj.weight", (d_model, d_model)),
            ParamShape(p + "attn.c_proj.bias", (d_model,)),
            ParamShape(p + "ln_2.weight", (d_model,)),
            ParamShape(p + "ln_2.bias", (d_model,)),
            ParamShape(p + "mlp.c_fc.weight", (d_model, 4 * d_model)),
            ParamShape(p + "mlp.c_fc.bias", (4 * d_model,)),
            ParamShape(p + "mlp.c_proj.weight", (4 * d_model, d_model)),
            ParamShape(p + "mlp.c_proj.bias", (d_model,)),
        ]
    if embeddings:
        shapes += [ParamShape("ln_f.weight", (d_model,)), ParamShape("ln_f.bias", (d_model,))]
    return shapes


def llama_shapes(
    d_model: int,
    layers: int,
    ffn: int,
    vocab: int,
    heads: int = 0,
    kv_heads: int = 0,
    tied: int = 0,
    cap: int = MAX_PARAMS,
) -> list[ParamShape]:
    """Llama-style decoder shapes (RMSNorm, grouped-query attention, SwiGLU MLP), at most ``cap`` parameters."""
    heads = heads or max(1, d_model // 128)
    kv_heads = kv_heads or heads
    if d_model % heads or heads % kv_heads:
        raise ShapeError(f"llama: d_model={d_model} must divide into heads={heads}, and heads into kv_heads={kv_heads}")
    kv_dim = d_model // heads * kv_heads

    def layer(i: int) -> list[ParamShape]:
        p = f"layers.{i}."
        return [
            ParamShape(p + "attention_norm.weight", (d_model,)),
            ParamShape(p + "attention.wq.weight", (d_model, d_model)),
            ParamShape(p + "attention.wk.weight", (kv_dim, d_model)),
            ParamShape(p + "attention.wv.weight", (kv_dim, d_model)),
            ParamShape(p + "attention.wo.weight", (d_model, d_model)),
            ParamShape(p + "ffn_norm.weight", (d_model,)),
            ParamShape(p + "feed_forward.w1.weight", (ffn, d_model)),
            ParamShape(p + "feed_forward.w3.weight", (ffn, d_model)),
            ParamShape(p + "feed_forward.w2.weight", (d_model, ffn)),
        ]

    ends = [ParamShape("embed.weight", (vocab, d_model)), ParamShape("norm.weight", (d_model,))]
    if not tied:
        ends.append(ParamShape("lm_head.weight", (vocab, d_model)))
    check_param_count(
        total_params(layer(0)) * layers + total_params(ends), "llama", cap
    )  # before building `layers` lists
    check_tensor_count(9 * layers + len(ends), "llama")
    shapes = [ends[0]]
    for i in range(layers):
        shapes += layer(i)
    return shapes + ends[1:]


def _parse_options(text: str, spec: str) -> dict[str, int]:
    options: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ShapeError(
                f"shapes preset {spec!r}: expected key=value, got {item!r}", "shapes preset: expected key=value"
            )
        try:
            number = float(value)
        except ValueError:
            raise ShapeError(
                f"shapes preset {spec!r}: {key}={value!r} is not a number", "shapes preset: not a number"
            ) from None
        if not (math.isfinite(number) and number == int(number) and 0 <= number <= MAX_PARAMS):
            raise ShapeError(
                f"shapes preset {spec!r}: {key}={value!r} must be a whole number from 0 to {MAX_PARAMS:.0e}",
                f"shapes preset: every option must be a whole number from 0 to {MAX_PARAMS:.0e}",
            )
        options[key.strip()] = int(number)
    return options


def _load_file(path: Path, cap: int = MAX_PARAMS) -> list[ParamShape]:
    """A shapes file's list: read as untrusted input, every problem one ShapeError that names no value in it."""
    try:
        data = untrusted.read_json(path, untrusted.SHAPES)
    except untrusted.BadInput as exc:
        raise ShapeError(str(exc)) from None
    return shapes_from_json(data, f"{untrusted.SHAPES.what} {untrusted.shown_path(path)}", cap)


def shapes_from_json(data: object, where: str, cap: int = MAX_PARAMS) -> list[ParamShape]:
    """``{"shapes": {name: [dims]}}``, ``{name: [dims]}`` or ``[[dims], ...]`` as a shape list, within the caps
    (``cap`` parameters)."""
    if isinstance(data, dict):
        data = data.get("shapes", data)
    if isinstance(data, dict):
        entries = list(data.items())
    else:
        entries = [(f"p{i}", dims) for i, dims in enumerate(data)] if isinstance(data, list) else []
    if len(entries) > MAX_TENSORS:
        raise ShapeError(f"{where}: {len(entries)} tensors, more than the {MAX_TENSORS} a model may have")
    shapes = []
    for name, dims in entries:
        if (
            not isinstance(dims, list)
            or not 1 <= len(dims) <= MAX_DIMS
            or not all(type(d) is int and 0 < d <= MAX_PARAMS for d in dims)
        ):
            raise ShapeError(
                f"{where}: {untrusted.shown_name(name)} must be a list of 1 to {MAX_DIMS} positive integers"
            )
        shapes.append(ParamShape(name, tuple(dims)))
    if not shapes:
        raise ShapeError(f'{where} lists no shapes (expected {{"shapes": {{name: [dims]}}}})')
    check_param_count(total_params(shapes), where, cap)
    return shapes


def names_a_file(spec: str) -> bool:
    """True when ``spec`` is not a preset or ``llama:...`` spec, so :func:`resolve_shapes` would read it as a file."""
    name = spec.partition(":")[0].strip().lower()
    return name not in _GPT2_SIZES and name not in _LLAMA_SIZES and name != "llama"


def resolve_shapes(spec: str, cap: int = MAX_PARAMS) -> list[ParamShape]:
    """Turn a preset name, a ``llama:...`` spec or a JSON path into a shape list of at most ``cap`` parameters."""
    name, _, rest = spec.partition(":")
    name = name.strip().lower()
    if name in _GPT2_SIZES:
        options = _parse_options(rest, spec)
        d_model, layers = _GPT2_SIZES[name]
        blocks = options.pop("blocks", 0)
        if options:
            raise ShapeError(
                f"shapes preset {spec!r}: unknown option(s) {', '.join(options)} (only blocks=N)",
                "shapes preset: unknown option (only blocks=N)",
            )
        if blocks > layers:
            raise ShapeError(
                f"shapes preset {spec!r}: blocks must be 1..{layers}", f"shapes preset: blocks must be 1..{layers}"
            )
        return gpt2_shapes(d_model, blocks or layers, embeddings=not blocks)
    if name in _LLAMA_SIZES or name == "llama":
        options = {**_LLAMA_SIZES.get(name, {}), **_parse_options(rest, spec)}
        missing = {"d_model", "layers", "ffn", "vocab"} - options.keys()
        if missing:
            example = "(e.g. llama:d_model=2048,layers=16,ffn=5632,vocab=32000)"
            raise ShapeError(
                f"shapes preset {spec!r}: missing {', '.join(sorted(missing))} {example}",
                f"shapes preset: missing {', '.join(sorted(missing))} {example}",
            )
        zero = [k for k in ("d_model", "layers", "ffn", "vocab") if options[k] < 1]
        if zero:
            raise ShapeError(
                f"shapes preset {spec!r}: {zero[0]} must be at least 1", f"shapes preset: {zero[0]} must be at least 1"
            )
        try:
            return llama_shapes(**options, cap=cap)
        except TypeError:
            options_are = "options are d_model, layers, ffn, vocab, heads, kv_heads, tied"
            raise ShapeError(f"shapes preset {spec!r}: {options_are}", f"shapes preset: {options_are}") from None
    path = Path(spec)
    if path.suffix.lower() == ".json" or path.exists():
        return _load_file(path, cap)
    choose = f"(choose from {', '.join(PRESETS)}, or a .json shapes file)"
    raise ShapeError(f"unknown shapes preset {spec!r} {choose}", f"unknown shapes preset {choose}")


def total_params(shapes: list[ParamShape]) -> int:
    """Number of scalar parameters in a shape list."""
    return sum(s.numel for s in shapes)
