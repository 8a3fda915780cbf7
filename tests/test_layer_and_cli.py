"""MoELayer run-time shape fallback, and the moe-core command line."""

import importlib.metadata
import json
import logging

import pytest
import torch

from moe_core import quant
from moe_core.cli import main
from moe_core.config import MoEConfig
from moe_core.hookspecs import hookimpl
from moe_core.layer import MoELayer, ShapeFallbackExhaustedError
from moe_core.platform import DeviceKind, preset
from moe_core.presets import random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.routing import Routing
from moe_core.spec import BackendSpec
from moe_core.support import Support

CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float32)


class PickyKernel(ReferenceKernel):
    """Computes like the reference but refuses more than 4 tokens."""

    backend_name = "picky"

    def check_shapes(self, hidden_states, routing):
        return Support.yes() if hidden_states.shape[0] <= 4 else Support.no("at most 4 tokens")


class PickyPlugin:
    @hookimpl
    def moe_core_backends(self):
        return [BackendSpec(name="picky", family="picky", priority=100, schemes=[quant.scheme("unquantized")], kernel=PickyKernel, devices={DeviceKind.CPU})]


def test_shape_fallback_is_explicit_and_logged(caplog):
    reg = Registry(autoload=False, environ={})
    reg.register(PickyPlugin(), name="picky")
    layer = MoELayer(CFG, random_layer(CFG, quant.scheme("unquantized")), platform=preset("cpu"), registry=reg, environ={})
    assert layer.backend == "picky" and layer.selection.fallbacks == ("reference",)
    small = torch.randn(3, 32)
    assert layer(small, Routing.from_logits(torch.randn(3, 4), 2)).shape == (3, 32)
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        out = layer(torch.randn(8, 32), Routing.from_logits(torch.randn(8, 4), 2))
    assert out.shape == (8, 32)
    assert "fallback to reference" in caplog.text and "picky refused shape (8, 32): at most 4 tokens" in caplog.text


def test_no_fallback_after_an_explicit_request():
    reg = Registry(autoload=False, environ={})
    reg.register(PickyPlugin(), name="picky")
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float32, moe_backend="picky")
    layer = MoELayer(cfg, random_layer(cfg, quant.scheme("unquantized")), platform=preset("cpu"), registry=reg, environ={})
    with pytest.raises(ShapeFallbackExhaustedError, match="at most 4 tokens"):
        layer(torch.randn(8, 32), Routing.from_logits(torch.randn(8, 4), 2))


def test_cli_explain_deepseek_fp8_block_on_simulated_h100(capsys):
    assert main(["explain", "--preset", "deepseek-v3", "--scheme", "fp8-block", "--platform", "h100"]) == 0
    out = capsys.readouterr().out
    assert "E=256 top_k=8 H=7168 I=2048" in out and "scheme=fp8-block" in out and "sm_90" in out
    assert "reference" in out and "=> " in out


def test_cli_explain_json_and_errors(capsys):
    assert main(["explain", "--preset", "tiny", "--json", "--platform", "cpu", "--scheme", "int8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "reference" and doc["layer"]["num_experts"] == 8
    assert main(["explain", "--preset", "tiny", "--backend", "nope", "--platform", "cpu"]) == 2
    assert "'nope' is not a registered MoE backend" in capsys.readouterr().err
    assert main(["explain", "--preset", "tiny", "--lora", "--platform", "cpu"]) == 2
    assert "LoRA is enabled" in capsys.readouterr().err


def test_cli_list_and_doctor(capsys):
    assert main(["list"]) == 0
    assert "reference" in capsys.readouterr().out
    assert main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(b["name"] == "reference" for b in doc["backends"])
    assert main(["doctor"]) in (0, 1)
    out = capsys.readouterr().out
    assert "platform:" in out and "optional package triton" in out
    import triton

    assert f"optional package triton      importable (triton {triton.__version__})" in out  # the distribution and its version


def test_package_versions_names_each_distribution_of_an_import_package():
    from moe_core.platform import package_versions

    # the distribution's version, which can differ from torch.__version__ ("2.11.0" vs "2.11.0+cu130" on the GPU image)
    assert package_versions("torch") == f"torch {importlib.metadata.version('torch')}"
    assert package_versions("no_such_package_here") == ""


def test_cli_run_prints_table_checksum_and_time(capsys):
    assert main(["run", "--preset", "tiny", "--tokens", "5", "--scheme", "fp8-block", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the run command uses the GPU when there is one
    assert "checksum" in out and f" ms on {device} via " in out and "=> " in out


def test_cli_run_on_the_cpu_of_a_gpu_machine_selects_for_the_cpu(monkeypatch, capsys):
    """`run --device cpu` on a GPU machine must not pick a GPU kernel for CPU tensors."""
    from moe_core import resolver
    from moe_core.platform import preset

    monkeypatch.setattr(resolver, "current_platform", lambda: preset("h100"))
    assert main(["run", "--preset", "tiny", "--tokens", "3", "--device", "cpu", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert "| platform: cpu cpu\n" in out and " ms on cpu via " in out and "via triton" not in out
