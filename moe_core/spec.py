"""BackendSpec: what a plugin declares about one fused-MoE backend."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from moe_core.config import ActivationFormat, MoEConfig
from moe_core.errors import InvalidConfigError
from moe_core.platform import DeviceKind, Platform
from moe_core.quant import QuantFamily, QuantKey, QuantScheme, describe_keys, quant_family

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

KeyPair = tuple["QuantKey | None", "QuantKey | None"]


def _key_pairs(schemes: Iterable[QuantScheme | KeyPair]) -> frozenset[KeyPair]:
    pairs = set()
    for item in schemes:
        if isinstance(item, QuantScheme):
            pairs.add(item.keys)
        elif isinstance(item, tuple) and len(item) == 2 and all(k is None or isinstance(k, QuantKey) for k in item):
            pairs.add(item)
        else:
            raise InvalidConfigError(f"BackendSpec.schemes entries must be QuantScheme or (weight_key, activation_key), got {item!r}")
    return frozenset(pairs)


def check_name(owner: str, attr: str, value: object) -> None:
    """Raise InvalidConfigError unless ``value`` is a lowercase ``[a-z][a-z0-9_]*`` name."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidConfigError(f"{owner}.{attr} must match [a-z][a-z0-9_]*, got {value!r}")


def check_class_ref(owner: str, attr: str, value: object) -> None:
    """Raise InvalidConfigError unless ``value`` is a class or a ``"module:Class"`` string."""
    if not (isinstance(value, type) or (isinstance(value, str) and ":" in value)):
        raise InvalidConfigError(f"{owner}: {attr} must be a class or 'module:Class', got {value!r}")


def check_devices(owner: str, devices: Iterable[DeviceKind]) -> frozenset[DeviceKind]:
    """``devices`` as a non-empty frozenset of DeviceKind, or InvalidConfigError."""
    devices = frozenset(devices)
    if not devices or not all(isinstance(d, DeviceKind) for d in devices):
        raise InvalidConfigError(f"{owner}: devices must be a non-empty set of DeviceKind")
    return devices


def platform_reasons(devices: frozenset[DeviceKind], requires: frozenset[str], platform: Platform) -> list[str]:
    """Why a declaration with these device kinds and required packages cannot run on ``platform``."""
    reasons = []
    if platform.kind not in devices:
        reasons.append(f"it runs on {', '.join(sorted(d.value for d in devices))}, not {platform.kind.value}")
    missing = sorted(p for p in requires if not platform.has_package(p))
    if missing:
        reasons.append(f"package(s) {', '.join(missing)} not importable")
    return reasons


def load_class(ref: "type | str") -> type:
    """A class given as itself or as ``"module:Qualified.Name"`` (imported on first use)."""
    if isinstance(ref, type):
        return ref
    module_name, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Validation:
    """Where a backend's conformance numerics last passed on real hardware — or that they never did.

    ``hardware`` (e.g. ``"NVIDIA H100 80GB HBM3"``), ``provider`` (the kernel library and version the
    run used, e.g. ``"deep_gemm 2.6.1 (54e2261)"``), ``date`` (ISO) and ``log`` (a path in moe-core's
    source repository, which a wheel does not contain, or a URL). An empty record (:data:`NOT_VALIDATED`)
    says "never validated on hardware".
    """

    hardware: str = ""
    provider: str = ""
    date: str = ""
    log: str = ""

    def __post_init__(self) -> None:
        if self.hardware and not self.date:
            raise InvalidConfigError("Validation: a record with hardware needs the date its numerics passed")

    @property
    def validated(self) -> bool:
        return bool(self.hardware)

    def describe(self) -> str:
        """One line for ``moe-core list`` / ``explain`` / ``doctor``."""
        if not self.validated:
            return "not validated on hardware"
        where = self.log if "://" in self.log else f"{self.log} in moe-core's source repository"
        details = ", ".join(x for x in (self.provider, self.date, f"log {where}" if self.log else "") if x)
        return f"validated on {self.hardware} ({details})"


#: The record of a backend whose numerics never ran on hardware.
NOT_VALIDATED = Validation()


@dataclass(frozen=True)
class BackendSpec:
    """Declaration of one backend, registered by a plugin through ``moe_core_backends``.

    The declarative fields let the core explain most rejections without asking the plugin; the
    plugin's ``moe_core_supports`` hook then answers the rest (compute capability, shapes, ...).

    Attributes:
        name: unique backend name, lowercase ``[a-z][a-z0-9_]*`` (``"triton"``, ``"flashinfer_trtllm"``).
        family: backend family, shared by a vendor's backends (``"flashinfer"``); environment
            switches and compatibility modes can disable a whole family.
        priority: default rank; higher is preferred. The reference backend uses 0; real GPU
            kernels use 100-1000. Ties are broken by name, never by registration order.
        family_priorities: per-quant-family overrides of ``priority`` (a mapping or pairs).
        schemes: (weight_key, activation_key) pairs, or QuantSchemes, the backend can ever run.
        formats: activation formats it runs.
        devices: device kinds it runs on.
        requires: optional packages (as in ``Platform.packages``) that must be importable.
        supports_lora / applies_swiglu_clamp / supports_expert_map: capability flags used by the
            resolver's policies.
        auto_select: False for backends that run only when explicitly requested.
        batched_variant: name of the sibling backend that runs the BATCHED_EXPERTS format; an
            explicit request for this backend in the batched format is mapped to it.
        kernel: the kernel class, or ``"module:Class"`` imported only when selected.
        description: one line for ``moe-core list``.
        validation: where its conformance numerics last passed on hardware (:class:`Validation`);
            the default says it never did. ``list``, ``explain`` and ``doctor`` show it.
    """

    name: str
    family: str
    priority: int
    schemes: frozenset[KeyPair]
    kernel: Any
    formats: frozenset[ActivationFormat] = frozenset({ActivationFormat.STANDARD})
    devices: frozenset[DeviceKind] = frozenset({DeviceKind.CUDA})
    requires: frozenset[str] = frozenset()
    family_priorities: tuple[tuple[QuantFamily, int], ...] = ()
    supports_lora: bool = False
    applies_swiglu_clamp: bool = False
    supports_expert_map: bool = True
    auto_select: bool = True
    batched_variant: str | None = None
    description: str = ""
    validation: Validation = NOT_VALIDATED
    plugin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for attr in ("name", "family"):
            check_name("BackendSpec", attr, getattr(self, attr))
        if self.name == "auto":
            raise InvalidConfigError("BackendSpec.name 'auto' is reserved for automatic selection")
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise InvalidConfigError(f"BackendSpec.priority must be an int, got {self.priority!r}")
        object.__setattr__(self, "schemes", _key_pairs(self.schemes))
        if not self.schemes:
            raise InvalidConfigError(f"BackendSpec {self.name!r} declares no quant scheme")
        formats = frozenset(self.formats)
        if not formats or not all(isinstance(f, ActivationFormat) for f in formats):
            raise InvalidConfigError(f"BackendSpec {self.name!r}: formats must be a non-empty set of ActivationFormat")
        object.__setattr__(self, "formats", formats)
        object.__setattr__(self, "devices", check_devices(f"BackendSpec {self.name!r}", self.devices))
        object.__setattr__(self, "requires", frozenset(self.requires))
        pairs = self.family_priorities.items() if isinstance(self.family_priorities, Mapping) else self.family_priorities
        normalized = []
        for fam, prio in pairs:
            fam = QuantFamily.parse(fam) if isinstance(fam, str) else fam
            if not isinstance(fam, QuantFamily) or not isinstance(prio, int) or isinstance(prio, bool):
                raise InvalidConfigError(f"BackendSpec {self.name!r}: family_priorities needs QuantFamily -> int, got {fam!r}: {prio!r}")
            normalized.append((fam, prio))
        object.__setattr__(self, "family_priorities", tuple(sorted(normalized, key=lambda p: p[0].value)))
        if self.batched_variant is not None and not _NAME.match(str(self.batched_variant)):
            raise InvalidConfigError(f"BackendSpec {self.name!r}: batched_variant must be a backend name")
        check_class_ref(f"BackendSpec {self.name!r}", "kernel", self.kernel)

    def priority_for(self, family: QuantFamily) -> int:
        """The default priority for one quant family."""
        return dict(self.family_priorities).get(family, self.priority)

    @property
    def quant_families(self) -> frozenset[QuantFamily]:
        return frozenset(quant_family(w, a) for w, a in self.schemes)

    def claims(self, weight_key: QuantKey | None, activation_key: QuantKey | None) -> bool:
        """True when the backend declares this (weight, activation) scheme."""
        return (weight_key, activation_key) in self.schemes

    def policy_reasons(self, config: MoEConfig) -> list[str]:
        """Reasons the config's own policies (LoRA, SwiGLU clamp, batched format) rule this backend out."""
        reasons = []
        if config.lora_enabled and not self.supports_lora:
            reasons.append("LoRA is enabled and this backend is not LoRA-capable")
        if config.swiglu_limit is not None and not self.applies_swiglu_clamp:
            reasons.append(f"swiglu_limit={config.swiglu_limit} is set and this backend does not apply the SwiGLU clamp")
        if config.activation_format not in self.formats:
            reasons.append(f"it does not run the {config.activation_format.value} activation format")
        return reasons

    def declared_reasons(self, query: "SupportQuery") -> list[str]:
        """Reasons against this backend that follow from its declaration alone."""
        reasons = []
        if not self.claims(query.weight_key, query.activation_key):
            reasons.append(f"it does not implement the {describe_keys(query.weight_key, query.activation_key)} scheme")
        reasons += self.policy_reasons(query.config)
        reasons += platform_reasons(self.devices, self.requires, query.platform)
        if query.config.parallel.use_ep and not self.supports_expert_map:
            reasons.append(f"expert parallelism (ep_size={query.config.parallel.ep_size}) needs an expert map and this backend has none")
        return reasons

    def load_kernel(self) -> type:
        """The kernel class, importing ``"module:Class"`` on first use."""
        return load_class(self.kernel)


@dataclass(frozen=True)
class SupportQuery:
    """Everything a supports() answer may depend on, bundled and hashable."""

    config: MoEConfig
    weight_key: QuantKey | None
    activation_key: QuantKey | None
    platform: Platform

    @property
    def activation_format(self) -> ActivationFormat:
        return self.config.activation_format

    @property
    def family(self) -> QuantFamily:
        return quant_family(self.weight_key, self.activation_key)
