"""Support: a yes/no answer that always carries its reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Support:
    """Whether a backend can run a layer, with human-readable reasons.

    ``ok`` is never returned bare: a "no" carries at least one reason saying what is missing
    (``"compute capability 8.9+ is required for fp8, this is sm_80"``); a "yes" may carry notes.
    Combine answers with ``&``: the result is ok only if both are, and keeps every reason.
    """

    ok: bool
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.ok, bool):
            raise TypeError(f"Support.ok must be a bool, got {self.ok!r}")
        reasons = tuple(self.reasons)
        if not all(isinstance(r, str) and r for r in reasons):
            raise TypeError(f"Support.reasons must be non-empty strings, got {self.reasons!r}")
        object.__setattr__(self, "reasons", reasons)
        if not self.ok and not reasons:
            raise ValueError("Support(ok=False) needs at least one reason: say what is missing")

    @classmethod
    def yes(cls, *notes: str) -> "Support":
        return cls(True, notes)

    @classmethod
    def no(cls, *reasons: str) -> "Support":
        return cls(False, reasons)

    @classmethod
    def from_reasons(cls, reasons: Iterable[str]) -> "Support":
        """ok when there is no reason against; otherwise no, with those reasons."""
        reasons = tuple(reasons)
        return cls(not reasons, reasons)

    def __and__(self, other: "Support") -> "Support":
        if self.ok and other.ok:
            return Support(True, self.reasons + other.reasons)
        return Support(False, tuple(r for s in (self, other) if not s.ok for r in s.reasons))

    def __bool__(self) -> bool:
        return self.ok

    def explain(self) -> str:
        return "; ".join(self.reasons) if self.reasons else ("ok" if self.ok else "not supported")
