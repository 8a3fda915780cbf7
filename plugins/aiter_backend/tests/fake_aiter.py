"""Tests only: a fake ``aiter`` whose functions have exactly the signatures recorded in the contract.

Every call is bound with ``inspect.Signature.bind`` (an unknown or missing argument raises
TypeError) and recorded. ``fused_moe`` returns zeros and ``shuffle_weight`` its input: the fake
checks plumbing, never numerics. Never registered as a plugin or installed.
"""

from __future__ import annotations

import enum
import sys
import types

import torch

from moe_core_aiter import contract


class FakeAiter:
    """Builds the fake modules, records calls as (qualname, bound arguments)."""

    def __init__(self, fp8: torch.dtype):
        self.calls: list[tuple[str, dict]] = []
        self.fp8 = fp8
        self.modules = {"aiter": types.ModuleType("aiter"), "aiter.ops": types.ModuleType("aiter.ops"),
                        "aiter.utility": types.ModuleType("aiter.utility")}
        for name, members in contract.ENUMS.items():
            setattr(self.modules[contract.ENUM_MODULE], name, enum.IntEnum(name, members))
        dtypes = types.ModuleType("aiter.utility.dtypes")
        dtypes.fp8 = fp8
        self.modules[dtypes.__name__] = dtypes
        self._add(contract.FUSED_MOE, lambda args: torch.zeros_like(args["hidden_states"]))
        self._add(contract.SHUFFLE_WEIGHT, lambda args: args["x"])

    def _add(self, record: contract.FunctionContract, result) -> None:
        sig = record.signature()

        def fake(*args, **kwargs):
            bound = sig.bind(*args, **kwargs).arguments
            self.calls.append((record.qualname, dict(bound)))
            return result(bound)

        fake.__signature__ = sig
        module = self.modules.setdefault(record.module, types.ModuleType(record.module))
        setattr(module, record.name, fake)

    def install(self, monkeypatch) -> None:
        for name, module in self.modules.items():
            monkeypatch.setitem(sys.modules, name, module)

    def called(self, qualname: str) -> list[dict]:
        return [args for name, args in self.calls if name == qualname]
