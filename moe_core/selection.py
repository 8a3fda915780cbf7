"""Selection: the chosen backend plus the whole ranked, explained candidate list."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from moe_core.quant import describe_keys
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support


class SelectionSource(enum.Enum):
    """Why the chosen backend was chosen."""

    PRIORITY = "priority"  # highest-ranked supported candidate
    REQUEST = "request"  # config.moe_backend
    ENV = "env"  # MOE_CORE_BACKEND (or a compatibility-mode variable)
    RANKING = "ranking"  # a measured ranking (Selection.decided_by says which)


class CandidateStatus(enum.Enum):
    """What happened to one candidate during selection."""

    SELECTED = "selected"
    RUNNER_UP = "runner-up"  # supported and allowed, ranked below the selection
    UNSUPPORTED = "unsupported"  # its supports() said no
    EXCLUDED_POLICY = "excluded: policy"  # LoRA / SwiGLU clamp / activation format
    EXCLUDED_ENV = "excluded: env"  # disabled by the environment
    MANUAL_ONLY = "manual only"  # never auto-selected; must be requested
    NOT_REQUESTED = "not requested"  # another backend was explicitly requested


@dataclass(frozen=True)
class Candidate:
    """One backend's line in the selection table."""

    name: str
    family: str
    plugin: str
    priority: int
    support: Support
    status: CandidateStatus
    note: str = ""

    @property
    def eligible(self) -> bool:
        """Allowed and supported: could run the layer if everything above it failed."""
        return self.status in (CandidateStatus.SELECTED, CandidateStatus.RUNNER_UP)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "plugin": self.plugin,
            "priority": self.priority,
            "supported": self.support.ok,
            "reasons": list(self.support.reasons),
            "status": self.status.value,
            "note": self.note,
        }


def render_table(query: SupportQuery, candidates: tuple[Candidate, ...]) -> str:
    """A plain-text table of candidates, in rank order, with every reason."""
    cfg = query.config
    head = (
        f"MoE layer: E={cfg.num_experts} top_k={cfg.top_k} H={cfg.hidden_size} I={cfg.intermediate_size} "
        f"dtype={cfg.dtype_name} act={cfg.activation.value} scheme={describe_keys(query.weight_key, query.activation_key)} "
        f"format={query.activation_format.value}"
        + (" lora" if cfg.lora_enabled else "")
        + (f" swiglu_limit={cfg.swiglu_limit}" if cfg.swiglu_limit is not None else "")
        + (f" ep={cfg.parallel.ep_size}" if cfg.parallel.use_ep else "")
        + f" | platform: {query.platform.describe()}"
    )
    return "\n".join([head, *candidate_lines(candidates, "backend", "(no backend claims this scheme)")])


def candidate_lines(candidates: tuple[Candidate, ...], noun: str, empty: str) -> list[str]:
    """The aligned rows of a candidate table (header first); ``empty`` fills a table with no row."""
    rows = [("#", noun, "family", "plugin", "prio", "status", "reasons")]
    for i, c in enumerate(candidates, 1):
        reasons = c.support.explain() if (c.support.reasons or not c.support.ok) else "supported"
        if c.note:
            reasons = f"{c.note}; {reasons}"
        rows.append((str(i), c.name, c.family, c.plugin, str(c.priority), c.status.value, reasons))
    if len(rows) == 1:
        rows.append(("-", empty, "", "", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(6)) + "  " + r[6] for r in rows]


@dataclass(frozen=True)
class Selection:
    """The resolver's answer.

    Attributes:
        backend: the chosen BackendSpec.
        source: why it was chosen (priority, request, env, ranking).
        candidates: every candidate in rank order with its Support and status.
        query: the question that was answered.
        decided_by: for automatic selection with a token count, which measurement decided
            (``measured: shipped ranking for NVIDIA H100 80GB HBM3, 2026-11-28``) or why the
            priority did (``by priority: no measurement for this shape``); else empty.
    """

    backend: BackendSpec
    source: SelectionSource
    candidates: tuple[Candidate, ...]
    query: SupportQuery
    decided_by: str = ""

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def kernel_cls(self) -> type:
        """The chosen backend's kernel class (imported on first access)."""
        return self.backend.load_kernel()

    @property
    def fallbacks(self) -> tuple[str, ...]:
        """Eligible backends ranked below the chosen one, for run-time shape fallback."""
        return tuple(c.name for c in self.candidates if c.status is CandidateStatus.RUNNER_UP)

    def explain(self) -> str:
        """The ranked table with reasons, and one line saying what was chosen and why."""
        why = f"by {self.source.value}" + (f"; {self.decided_by}" if self.source is SelectionSource.RANKING else "")
        lines = f"{render_table(self.query, self.candidates)}\n=> {self.backend.name} ({why}); {self.backend.validation.describe()}"
        if self.decided_by and self.source is not SelectionSource.RANKING:
            lines += f"\n   {self.decided_by}"
        return lines

    def to_dict(self) -> dict[str, Any]:
        cfg = self.query.config
        return {
            "backend": self.backend.name,
            "kernel": self.backend.kernel if isinstance(self.backend.kernel, str) else f"{self.backend.kernel.__module__}:{self.backend.kernel.__qualname__}",
            "source": self.source.value,
            "decided_by": self.decided_by,
            "validation": self.backend.validation.describe(),
            "scheme": describe_keys(self.query.weight_key, self.query.activation_key),
            "format": self.query.activation_format.value,
            "platform": self.query.platform.describe(),
            "layer": {
                "num_experts": cfg.num_experts,
                "top_k": cfg.top_k,
                "hidden_size": cfg.hidden_size,
                "intermediate_size": cfg.intermediate_size,
                "dtype": cfg.dtype_name,
                "activation": cfg.activation.value,
                "swiglu_limit": cfg.swiglu_limit,
                "lora_enabled": cfg.lora_enabled,
                "moe_backend": cfg.moe_backend,
            },
            "candidates": [c.to_dict() for c in self.candidates],
        }
