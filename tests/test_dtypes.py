"""The one dtype table: the sizes the model counts with are the sizes torch allocates and sends."""

from __future__ import annotations

from netbench.dtypes import DTYPE_BYTES, torch_dtypes
from netbench.replicators.base import WIRE_DTYPES
from netbench.replicators.wire import INDEX_DTYPES


def test_model_sizes_are_torch_sizes() -> None:
    for name, dtype in torch_dtypes(*DTYPE_BYTES).items():
        assert DTYPE_BYTES[name] == dtype.itemsize, name


def test_replicators_send_the_tables_dtypes() -> None:
    assert {n: d.itemsize for n, d in {**WIRE_DTYPES, **INDEX_DTYPES}.items()} == {
        n: DTYPE_BYTES[n] for n in (*WIRE_DTYPES, *INDEX_DTYPES)
    }
    assert set(WIRE_DTYPES) == {"fp32", "bf16"} and set(INDEX_DTYPES) == {"int16", "int32", "int64"}
