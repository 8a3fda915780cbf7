"""A stand-in for a loaded compiled ops library, for contract tests of an :class:`moe_core.ops_library.OpsLibrary`
on machines without the library: only what :meth:`~moe_core.ops_library.OpsLibrary.schema_mismatches` reads."""

from __future__ import annotations

import types

import torch


def registered_ops(namespace: str, schemas: dict[str, str]) -> types.SimpleNamespace:
    """A ``torch.ops.<namespace>`` stand-in: ``<op>.default._schema`` parsed from each schema text (``name(...) -> ...``)."""
    ops = types.SimpleNamespace()
    for name, text in schemas.items():
        schema = torch._C.parse_schema(f"{namespace}::{text}")
        setattr(ops, name, types.SimpleNamespace(default=types.SimpleNamespace(_schema=schema)))
    return ops
