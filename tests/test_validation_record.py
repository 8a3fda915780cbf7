"""Every backend's validation record: declared, shown by list / explain / doctor, and a warning on request."""

import dataclasses
import importlib.metadata
import json
import logging

import pytest
import torch

from moe_core import quant
from moe_core.cli import _install_status, main
from moe_core.config import MoEConfig
from moe_core.errors import InvalidConfigError
from moe_core.platform import DeviceKind, preset
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.spec import NOT_VALIDATED, BackendSpec, Validation
from moe_core.testing.fakes import FakeBackend, FakeKernel, FakePlugin

UNQ = quant.scheme("unquantized")
CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.float16)


def _spec(name: str, validation: Validation = NOT_VALIDATED, requires=()) -> BackendSpec:
    return BackendSpec(name=name, family="fakes", priority=100, schemes=[UNQ], kernel=FakeKernel,
                       devices={DeviceKind.CUDA}, requires=frozenset(requires), validation=validation)


def test_a_record_says_where_and_when_or_that_it_never_ran():
    assert NOT_VALIDATED.describe() == "not validated on hardware" and not NOT_VALIDATED.validated
    record = Validation(hardware="NVIDIA H100 80GB HBM3", provider="triton 3.6.0", date="2026-11-23", log="docs/x.log")
    assert record.validated
    assert record.describe() == "validated on NVIDIA H100 80GB HBM3 (triton 3.6.0, 2026-11-23, log docs/x.log in moe-core's source repository)"
    online = Validation(hardware="NVIDIA H100 80GB HBM3", date="2026-11-23", log="https://example.org/x.log")
    assert online.describe() == "validated on NVIDIA H100 80GB HBM3 (2026-11-23, log https://example.org/x.log)"
    with pytest.raises(InvalidConfigError, match="needs the date"):
        Validation(hardware="NVIDIA H100 80GB HBM3")


def test_install_status_names_the_missing_packages():
    assert _install_status(_spec("needy", requires=("deep_gemm",)), preset("a100")).startswith("not installed here (needs deep_gemm")
    assert _install_status(_spec("needy", requires=("deep_gemm",)), preset("h100")) == "installed"


def test_list_and_explain_show_every_backends_record(capsys):
    assert main(["list", "--json"]) == 0
    backends = {b["name"]: b for b in json.loads(capsys.readouterr().out)["backends"]}
    assert backends["reference"]["validation"]["summary"].startswith("validated on x86-64 CPU")
    assert all("summary" in b["validation"] for b in backends.values())
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert text.count("validated on") + text.count("not validated on hardware") >= len(backends)
    assert main(["explain", "--preset", "tiny", "--scheme", "unquantized", "--dtype", "float32", "--platform", "cpu", "--backend", "reference"]) == 0
    assert "=> reference (by request); validated on x86-64 CPU" in capsys.readouterr().out


def test_doctor_lists_each_backend_with_its_record(capsys):
    main(["doctor"])
    out = capsys.readouterr().out
    assert "backends:" in out and "reference" in out and "validated on x86-64 CPU" in out


def test_requesting_an_unvalidated_backend_warns_once_and_priority_never_warns(caplog):
    reg = Registry(autoload=False, environ={})
    reg.register(FakePlugin([FakeBackend(_spec("untested_vendor")),
                             FakeBackend(_spec("tested_vendor", Validation(hardware="NVIDIA H100", date="2026-11-23")))]), name="fakes")
    h100 = preset("h100")
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        assert select(CFG, platform=h100, registry=reg, environ={}).name in ("untested_vendor", "tested_vendor")
        assert not [r for r in caplog.records if "never validated" in r.getMessage()]
        assert select(CFG, platform=h100, registry=reg, environ={"MOE_CORE_BACKEND": "tested_vendor"}).name == "tested_vendor"
        assert not [r for r in caplog.records if "never validated" in r.getMessage()]
        for _ in range(2):
            assert select(CFG, platform=h100, registry=reg, environ={"MOE_CORE_BACKEND": "untested_vendor"}).name == "untested_vendor"
    warnings = [r.getMessage() for r in caplog.records if "never validated" in r.getMessage()]
    assert warnings == ["MoE backend 'untested_vendor' was requested, but its numerics were never validated on hardware (plugin fakes); running it as asked"]


def test_every_installed_record_points_at_a_log_in_the_repository():
    """A record is evidence only if its log exists: each repository path of every registered backend and dispatcher."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    reg = Registry()
    records = [(s.name, s.validation) for s in reg.specs.values()] + [(d.name, d.validation) for d in reg.dispatchers.values()]
    for name, record in records:
        if not record.validated or "://" in record.log:
            continue
        path = record.log.split(" ")[0]  # "tests/test_reference.py (every CI run)" names the file first
        assert (root / path).is_file(), f"{name}: validation log {record.log!r} is not a file in the repository"


def test_the_validation_line_of_a_gpu_conformance_run(monkeypatch):
    from moe_core.testing.conformance import validation_line

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    records = [{"scheme": "w4a16", "tokens": 1}, {"scheme": "w4a16", "tokens": 7}, {"scheme": "mxfp4", "skipped": "needs bf16"}]
    line = validation_line(records, "torch")
    assert line.startswith(f"validated: NVIDIA H100 80GB HBM3, torch {importlib.metadata.version('torch')}, ")
    assert line.endswith("['w4a16'] skipped: [('mxfp4', 'needs bf16')]")
    with pytest.raises(AssertionError, match="no scheme ran"):  # nothing ran: nothing is validated
        validation_line([{"scheme": "mxfp4", "skipped": "needs bf16"}], "torch")


def test_an_unvalidated_backend_chosen_automatically_on_real_hardware_warns_once(caplog):
    """On this machine's own hardware an automatic pick of a never-validated backend is said once, with the way out;
    a plan for a simulated machine and a validated pick say nothing."""
    reg = Registry(autoload=False, environ={})
    reg.register(FakePlugin([FakeBackend(_spec("untested_vendor"))]), name="fakes")
    real = dataclasses.replace(preset("h100"), simulated=False)
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        assert select(CFG, platform=preset("h100"), registry=reg, environ={}).name == "untested_vendor"
        assert not [r for r in caplog.records if "never validated" in r.getMessage()]
        for _ in range(2):
            assert select(CFG, platform=real, registry=reg, environ={}).name == "untested_vendor"
    warnings = [r.getMessage() for r in caplog.records if "never validated" in r.getMessage()]
    assert warnings == ["MoE backend 'untested_vendor' was chosen automatically (priority), but its numerics were never validated "
                        "on hardware (plugin fakes); set MOE_CORE_DISABLE=untested_vendor to keep it out"]
