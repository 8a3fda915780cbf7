"""What ``moe-core doctor`` and ``python -m moe_core_marlin`` say about the Marlin ops library on this machine."""

from __future__ import annotations

from moe_core_marlin import contract, library


def lines() -> list[str]:
    """The library file and where it was found, its vLLM version, and (on a GPU machine) the ops it registers."""
    location = library.locate()
    if location is None:
        return [library.missing_reason()]
    version = location.vllm_version or f"not recorded with the file (the contract was read from vLLM {contract.VLLM_VERSION})"
    out = [f"ops library: {location.path} (from {location.source})", f"vLLM version: {version}"]
    try:
        library.ops()
    except library.MarlinUnavailableError as exc:
        return out + [f"not usable: {exc}"]
    names = library.registered_ops()
    out.append(f"registers {len(names)} ops under torch.ops.{contract.NAMESPACE}: {', '.join(names)}")
    out.append(f"schemas of {', '.join(op.name for op in contract.OPS)} match the contract (vLLM {contract.VLLM_VERSION})")
    return out
