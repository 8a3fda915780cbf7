"""JIT-built modules: the facts against FlashInfer's own dispatch and generators, supports() on the real
machine with FlashInfer's JIT cache simulated (a temporary JIT directory), the ``build`` command, and
the ``moe_core_doctor`` report. CPU only: nothing here compiles.
"""

import dataclasses
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import torch

from moe_core.config import MoEConfig
from moe_core.platform import preset
from moe_core.quant import scheme
from moe_core import resolver
from moe_core.resolver import select
from moe_core.spec import SupportQuery
from moe_core.testing import conformance

pytest.importorskip("flashinfer.fused_moe.api", reason="needs flashinfer-python (scripts/bootstrap.sh installs it)")

from flashinfer.fused_moe import core as fi_core  # noqa: E402
from flashinfer.fused_moe import runners as fi_runners  # noqa: E402
from flashinfer.jit import env as fi_env  # noqa: E402
from flashinfer.jit import fused_moe as fi_gen  # noqa: E402

import moe_core_flashinfer.__main__ as cli  # noqa: E402
from moe_core_flashinfer import contract, facts, report  # noqa: E402

CFG = MoEConfig(num_experts=64, top_k=4, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
REAL_H100 = dataclasses.replace(preset("h100"), simulated=False)
USABLE = {t: facts.Toolchain(t, True, "ok (test)") for t in ("nvcc", "cubins", "cutlass-dsl", "cuda-tile")}
BUILD_CUTLASS = "`python -m moe_core_flashinfer build cutlass`"


class _Stop(Exception):
    """Raised by a fake generator to stop FlashInfer's loader once it has picked one."""


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_flashinfer.plugin", name="flashinfer")


@pytest.fixture
def jit_dir(monkeypatch, tmp_path):
    """FlashInfer's JIT cache redirected to an empty temporary directory; every machine fact usable."""
    cache = tmp_path / "cached_ops"
    cache.mkdir()
    monkeypatch.setattr(fi_env, "FLASHINFER_JIT_DIR", cache)
    monkeypatch.setattr(fi_env, "get_aot_artifacts", lambda name: ())
    monkeypatch.setattr(facts, "toolchains", lambda: dict(USABLE))
    monkeypatch.setattr(facts, "nvcc_path", lambda: "/opt/cuda/bin/nvcc")
    monkeypatch.delenv(facts.DISABLE_JIT_ENV, raising=False)
    clear = facts.jit_state.cache_clear  # a test may replace jit_state itself
    clear()
    yield cache
    clear()
    resolver.clear_cache()


def _build(cache: pathlib.Path, name: str) -> pathlib.Path:
    """What FlashInfer's build leaves behind: ``<JIT dir>/<name>/<name>.so``."""
    (cache / name).mkdir(exist_ok=True)
    library = cache / name / f"{name}.so"
    library.write_bytes(b"\x7fELF")
    facts.jit_state.cache_clear()
    resolver.clear_cache()  # selections are cached per process too
    return library


def _support(reg, backend, platform, scheme_name="unquantized"):
    sch = scheme(scheme_name)
    return reg.supports(reg.specs[backend], SupportQuery(CFG, sch.weight_key, sch.activation_key, platform))


def _select(reg, platform, scheme_name="unquantized"):
    sch = scheme(scheme_name)
    return select(CFG, sch.weight_key, sch.activation_key, platform=platform, registry=reg, environ={})


# ------------------------------------------------------------------ the facts against FlashInfer
@pytest.mark.parametrize("arch", sorted(facts.JIT_MODULES["cutlass"]))
def test_cutlass_generator_per_arch_is_flashinfers_dispatch(monkeypatch, arch):
    """``get_cutlass_fused_moe_module(str(arch))`` (what the CUTLASS runners call) picks the recorded generator."""
    called = []
    for name in dir(fi_core):
        if name.startswith("gen_cutlass_fused_moe_sm"):
            def fake(*args, _name=name, **kwargs):
                called.append(_name)
                raise _Stop
            monkeypatch.setattr(fi_core, name, fake)
    with pytest.raises(_Stop):
        fi_core.get_cutlass_fused_moe_module.__wrapped__(str(arch))
    assert called == [facts.JIT_MODULES["cutlass"][arch].generator]


@pytest.mark.parametrize("arch", sorted(facts.JIT_MODULES["trtllm"]))
def test_trtllm_generator_per_arch_is_flashinfers_dispatch(monkeypatch, arch):
    """``get_trtllm_moe_sm100_module()`` builds the Rubin variant on sm_107 only, as recorded."""
    seen = []
    monkeypatch.setattr(fi_core.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(fi_core, "get_compute_capability", lambda device: divmod(arch, 10))
    monkeypatch.setattr(fi_core, "_get_trtllm_moe_sm100_module_impl", lambda enable_rubin: seen.append(enable_rubin))
    fi_core.get_trtllm_moe_sm100_module()
    assert seen == [dict(facts.JIT_MODULES["trtllm"][arch].kwargs).get("enable_rubin", False)]


def test_recorded_loaders_exist():
    for loader in facts.JIT_LOADERS.values():
        assert callable(getattr(fi_core, loader))


@pytest.fixture
def captured_specs(monkeypatch, tmp_path):
    """FlashInfer's generators run for real (CUTLASS instantiations into tmp), ``gen_jit_spec`` captured, nothing fetched."""
    specs = []
    monkeypatch.setattr(fi_gen, "gen_jit_spec", lambda name, sources, **kw: specs.append((name, len(sources))))
    monkeypatch.setattr(fi_gen.jit_env, "FLASHINFER_GEN_SRC_DIR", tmp_path)
    monkeypatch.setattr(fi_gen, "is_cuda_version_at_least", lambda version: True)
    monkeypatch.setattr(fi_gen.current_compilation_context, "get_nvcc_flags_list", lambda **kw: [])
    for helper in ("get_artifact", "get_meta_hash", "ensure_symlink", "verify_symlinked_headers", "write_filtered_metainfo"):
        monkeypatch.setattr(fi_gen, helper, lambda *args, **kw: "stub")
    monkeypatch.setattr(fi_gen, "_should_enable_sm90_moe_prebuilt_d_descriptor", lambda: False)
    return specs


def test_module_names_and_sizes_are_flashinfers(captured_specs):
    """Each recorded module: the name its generator gives the JitSpec and its number of sources (248 on sm_90)."""
    modules = {m.name: m for family in facts.JIT_MODULES.values() for m in family.values()}
    for module in modules.values():
        captured_specs.clear()
        getattr(fi_gen, module.generator)(**dict(module.kwargs))
        assert captured_specs == [(module.name, module.compile_units)], module
    assert modules["fused_moe_90"].compile_units == 248


def test_h20_variant_is_flashinfers(captured_specs, monkeypatch):
    module = facts.JIT_MODULES["cutlass"][90]
    monkeypatch.setattr(fi_gen, "_should_enable_sm90_moe_prebuilt_d_descriptor", lambda: True)
    fi_gen.gen_cutlass_fused_moe_sm90_module()
    assert captured_specs[0][0] == module.variant[1] == facts.jit_module_name(module)
    monkeypatch.setattr(fi_gen, "_should_enable_sm90_moe_prebuilt_d_descriptor", lambda: False)
    assert facts.jit_module_name(module) == "fused_moe_90"


def test_jit_built_bindings_are_flashinfers_nvcc_runners():
    """jit_module follows the runner's base class, and every arch FlashInfer supports has a recorded module."""
    bases = {"cutlass": fi_runners._CutlassRunnerBase, "trtllm": fi_runners._TrtllmRunnerBase}
    for bindings in contract.BINDINGS.values():
        for binding in bindings.values():
            runner = getattr(fi_runners, binding.runner)
            assert {f for f, base in bases.items() if issubclass(runner, base)} == ({binding.jit_module} - {""}), binding.runner
            if binding.jit_module:
                assert set(facts.supported_archs(binding.config)) <= set(facts.JIT_MODULES[binding.jit_module]), binding.config


# ------------------------------------------------------------------ jit_state on a simulated cache
def test_state_follows_flashinfers_jit_cache(jit_dir):
    state = facts.jit_state("cutlass", 90)
    assert state.status == facts.NOT_BUILT and not state.ready and state.where == str(jit_dir)
    reason = state.reason()
    assert "fused_moe_90" in reason and "248 nvcc/C++ compile units" in reason and BUILD_CUTLASS in reason
    library = _build(jit_dir, "fused_moe_90")
    state = facts.jit_state("cutlass", 90)
    assert state.status == facts.BUILT and state.ready and state.where == str(library) and state.reason() == ""
    assert facts.jit_state("cutlass", 80) is None and facts.jit_state("trtllm", 90) is None  # nothing JIT-built there


def test_prebuilt_module_counts_as_ready(jit_dir, monkeypatch):
    artifact = fi_env.AOTArtifact("flashinfer-jit-cache-cu130", pathlib.Path("/site/jit_cache/fused_moe_90/fused_moe_90.so"), None)
    monkeypatch.setattr(fi_env, "get_aot_artifacts", lambda name: (artifact,) if name == "fused_moe_90" else ())
    state = facts.jit_state("cutlass", 90)
    assert state.status == facts.PREBUILT and state.ready and "flashinfer-jit-cache-cu130" in state.where


def test_state_is_cached_per_process(jit_dir, monkeypatch):
    calls = []
    monkeypatch.setattr(fi_env, "get_aot_artifacts", lambda name: calls.append(name) or ())
    assert facts.jit_state("cutlass", 90) is facts.jit_state("cutlass", 90)
    assert calls == ["fused_moe_90"]


@pytest.mark.parametrize("blocked", ["disabled", "no-nvcc", "no-sources"])
def test_unbuildable_module_says_why(jit_dir, monkeypatch, tmp_path, blocked):
    if blocked == "disabled":
        monkeypatch.setenv(facts.DISABLE_JIT_ENV, "1")
    elif blocked == "no-nvcc":
        monkeypatch.setattr(facts, "nvcc_path", lambda: None)
    else:
        monkeypatch.setattr(fi_env, "FLASHINFER_CSRC_DIR", tmp_path / "csrc-absent")
    state = facts.jit_state("cutlass", 90)
    assert not state.ready and state.blocker
    assert "cannot be built here" in state.reason() and {"disabled": "FLASHINFER_DISABLE_JIT", "no-nvcc": "no nvcc",
                                                         "no-sources": "csrc-absent"}[blocked] in state.reason()


def test_unreadable_jit_layout_refuses(jit_dir, monkeypatch):
    def moved(name):
        raise AttributeError("get_aot_artifacts moved (test)")

    monkeypatch.setattr(fi_env, "get_aot_artifacts", moved)
    state = facts.jit_state("cutlass", 90)
    assert state.status == facts.UNKNOWN and not state.ready
    assert "moved (test)" in state.reason() and BUILD_CUTLASS in state.reason()


# ------------------------------------------------------------------ supports() and selection
def test_unbuilt_module_is_refused_on_the_real_machine_then_selected_once_built(reg, jit_dir):
    for scheme_name in ("unquantized", "fp8-tensor"):
        verdict = _support(reg, "flashinfer_cutlass", REAL_H100, scheme_name)
        assert not verdict.ok and BUILD_CUTLASS in verdict.explain() and "fused_moe_90" in verdict.explain()
    assert _select(reg, REAL_H100).name != "flashinfer_cutlass"
    _build(jit_dir, "fused_moe_90")
    assert _support(reg, "flashinfer_cutlass", REAL_H100).ok
    assert _select(reg, REAL_H100).name == "flashinfer_cutlass"
    assert _select(reg, REAL_H100, "fp8-tensor").name == "flashinfer_cutlass"


def test_trtllm_module_is_checked_too(reg, jit_dir):
    real_b200 = dataclasses.replace(preset("b200"), simulated=False)
    verdict = _support(reg, "flashinfer_trtllm", real_b200)
    assert not verdict.ok and "fused_moe_trtllm_sm100" in verdict.explain() and "build trtllm`" in verdict.explain()
    _build(jit_dir, "fused_moe_trtllm_sm100")
    assert _support(reg, "flashinfer_trtllm", real_b200).ok


def test_a_built_module_needs_no_compiler(reg, jit_dir, monkeypatch):
    _build(jit_dir, "fused_moe_90")
    monkeypatch.setattr(facts, "toolchains", lambda: {**USABLE, "nvcc": facts.Toolchain("nvcc", False, "no nvcc (test)")})
    assert _support(reg, "flashinfer_cutlass", REAL_H100).ok


def test_arch_refusals_carry_no_build_advice(reg, jit_dir):
    verdict = _support(reg, "flashinfer_cutlass", REAL_H100, "nvfp4")  # CutlassNvfp4 runs on sm_100+ only
    assert not verdict.ok and "not sm_90" in verdict.explain() and "build cutlass" not in verdict.explain()


def test_simulated_presets_stay_declarative(reg, monkeypatch):
    def looked(*args):
        raise AssertionError("jit_state asked about a simulated platform")

    monkeypatch.setattr(facts, "jit_state", looked)
    assert _support(reg, "flashinfer_cutlass", preset("h100")).ok
    assert _support(reg, "flashinfer_trtllm", preset("b200")).ok
    assert _select(reg, preset("h100")).name == "flashinfer_cutlass"


# ------------------------------------------------------------------ the build command
@pytest.mark.parametrize("argv", [["build"], ["build", "nope"], ["build", "cutlass", "--jobs", "0"], ["build", "cutlass", "--arch", "hopper"]])
def test_build_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("text,arch", [("90", 90), ("9.0", 90), ("sm_90", 90), ("SM100", 100), ("12.1", 121)])
def test_arch_argument(text, arch):
    assert cli._arch_argument(text) == arch


def test_build_needs_a_known_arch(monkeypatch, capsys):
    monkeypatch.setattr(cli, "local_arch", lambda: None)
    assert cli.main(["build", "cutlass"]) == 1
    assert "no CUDA GPU is visible" in capsys.readouterr().err
    assert cli.main(["build", "cutlass", "--arch", "80"]) == 1
    assert "build no module for sm_80; they run on sm_89, sm_90" in capsys.readouterr().err


def test_build_dry_run_builds_nothing(jit_dir, monkeypatch, capsys):
    monkeypatch.setattr(cli, "local_arch", lambda: None)
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "9.0")  # restored afterwards; the command sets it only when unset

    def generated(module):
        raise AssertionError("a dry run generated the JitSpec")

    monkeypatch.setattr(facts, "jit_generator", generated)
    assert cli.main(["build", "cutlass", "--arch", "9.0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would build fused_moe_90 for sm_90 (248 nvcc/C++ compile units" in out and str(jit_dir) in out
    assert list(jit_dir.iterdir()) == []


def test_build_sets_the_arch_list_only_when_unset(jit_dir, monkeypatch):
    monkeypatch.setattr(cli, "local_arch", lambda: None)
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "x")
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST")  # absent now, and absent again after the test
    cli.build("cutlass", 100, dry_run=True, out=lambda line: None)
    assert cli.os.environ["FLASHINFER_CUDA_ARCH_LIST"] == "10.0"
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "9.0a 10.0a")
    cli.build("cutlass", 100, dry_run=True, out=lambda line: None)
    assert cli.os.environ["FLASHINFER_CUDA_ARCH_LIST"] == "9.0a 10.0a"


def test_build_when_already_built(jit_dir, monkeypatch, capsys):
    monkeypatch.setattr(cli, "local_arch", lambda: 90)
    _build(jit_dir, "fused_moe_90")
    assert cli.main(["build", "cutlass"]) == 0
    assert "already built" in capsys.readouterr().out


class FakeSpec:
    """A JitSpec whose build writes its objects (slowly enough for a progress line) and library into the JIT dir."""

    def __init__(self, cache: pathlib.Path, name: str, units: int, fail: bool = False):
        self.name, self.build_dir, self.units, self.fail, self.calls = name, cache / name, units, fail, []

    def get_object_paths(self):
        return [self.build_dir / f"unit{i}.cuda.o" for i in range(self.units)]

    def build_and_load(self):
        self.calls.append("build_and_load")
        if self.fail:
            raise RuntimeError("Ninja build failed. (test)")
        self.build_dir.mkdir(parents=True, exist_ok=True)
        for path in self.get_object_paths():
            path.write_bytes(b"")
            time.sleep(0.02)
        (self.build_dir / f"{self.name}.so").write_bytes(b"\x7fELF")
        return object()

    def build(self, need_lock=False):
        self.calls.append(f"build(need_lock={need_lock})")
        self.build_and_load()


@pytest.fixture
def fake_build(jit_dir, monkeypatch):
    """The build command on a fake GPU (sm_90) with a fake FlashInfer generator; MAX_JOBS restored afterwards."""
    specs = []
    monkeypatch.setattr(cli, "local_arch", lambda: 90)
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setenv("MAX_JOBS", "unset-by-test")

    def generator(module):
        def make():
            specs.append(FakeSpec(jit_dir, module.name, 5))
            return specs[-1]
        return make

    monkeypatch.setattr(facts, "jit_generator", generator)
    return specs


def test_build_then_the_backend_is_selected(reg, jit_dir, fake_build):
    assert not _support(reg, "flashinfer_cutlass", REAL_H100).ok
    lines = []
    assert cli.build("cutlass", jobs=3, out=lines.append, interval=0.01) == 0
    assert fake_build[0].calls == ["build_and_load"] and cli.os.environ["MAX_JOBS"] == "3"
    assert lines[0].startswith("building fused_moe_90 for sm_90 (248 nvcc/C++ compile units")
    assert any("compile units done after" in line for line in lines), lines
    assert "are now selected normally" in lines[-1]
    assert facts.jit_state("cutlass", 90).status == facts.BUILT
    assert _select(reg, REAL_H100).name == "flashinfer_cutlass"


def test_build_for_another_arch_does_not_load(jit_dir, fake_build, monkeypatch):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.0")
    assert cli.build("cutlass", 100, out=lambda line: None) == 0
    assert fake_build[0].calls == ["build(need_lock=True)", "build_and_load"]  # FakeSpec.build delegates


def test_build_failures_are_typed(jit_dir, fake_build, monkeypatch, capsys):
    monkeypatch.setattr(facts, "jit_generator", lambda module: lambda: FakeSpec(jit_dir, module.name, 2, fail=True))
    with pytest.raises(cli.JitBuildError, match="failed to build fused_moe_90.*Ninja build failed"):
        cli.build("cutlass", out=lambda line: None)
    assert cli.main(["build", "cutlass"]) == 1 and "error: FlashInfer failed to build" in capsys.readouterr().err
    monkeypatch.setenv(facts.DISABLE_JIT_ENV, "1")
    facts.jit_state.cache_clear()
    with pytest.raises(cli.JitBuildError, match="FLASHINFER_DISABLE_JIT"):
        cli.build("cutlass", out=lambda line: None)
    monkeypatch.delenv(facts.DISABLE_JIT_ENV)
    facts.jit_state.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "ninja" else f"/usr/bin/{tool}")
    with pytest.raises(cli.JitBuildError, match="ninja"):
        cli.build("cutlass", out=lambda line: None)


# ------------------------------------------------------------------ moe_core_doctor
def test_doctor_hook_returns_the_report(reg):
    lines = reg.doctor_reports()["flashinfer"]
    assert lines and all(isinstance(line, str) for line in lines)
    assert lines[0].startswith(f"flashinfer-python: {facts.version()}")
    assert "JIT toolchains:" in lines and any(line.startswith("  flashinfer_cutile ") for line in lines)
    assert not [p for p in reg.problems if p.stage == "moe_core_doctor"]


def test_report_on_the_real_machine_names_the_build(reg, jit_dir):
    lines = report.lines(registry=reg, platform=REAL_H100)
    assert "JIT-built modules for sm_90:" in lines
    assert any("fused_moe_90 (sm_90) not built; build with " + BUILD_CUTLASS in line for line in lines), lines
    assert any(line.startswith("  trtllm   builds no module on this architecture") for line in lines)
    cutlass = [line for line in lines if line.startswith("  flashinfer_cutlass ") and " unquantized " in line]
    assert cutlass and "no: " in cutlass[0] and BUILD_CUTLASS in cutlass[0]
    _build(jit_dir, "fused_moe_90")
    lines = report.lines(registry=reg, platform=REAL_H100)
    assert any("fused_moe_90 (sm_90) built: " in line for line in lines)


def test_report_parts_are_isolated(jit_dir, monkeypatch):
    def broken(*args):
        raise RuntimeError("probe exploded (test)")

    monkeypatch.setattr(facts, "toolchains", broken)
    monkeypatch.setattr(facts, "jit_state", broken)
    fresh = conformance.registry_with("moe_core_flashinfer.plugin", name="flashinfer")  # its supports() failures become its problems
    lines = report.lines(registry=fresh, platform=REAL_H100)
    assert lines[0].startswith("flashinfer-python: ")
    assert "(probing toolchains failed: RuntimeError: probe exploded (test))" in lines
    assert "(reading FlashInfer's JIT cache failed: RuntimeError: probe exploded (test))" in lines
    assert sum(line.startswith("  flashinfer_") for line in lines) == sum(len(b) for b in contract.BINDINGS.values())


def test_doctor_hook_failure_is_isolated_by_the_registry(reg, monkeypatch):
    monkeypatch.setattr(report, "lines", lambda: (_ for _ in ()).throw(RuntimeError("report exploded (test)")))
    fresh = conformance.registry_with("moe_core_flashinfer.plugin", name="flashinfer")
    assert fresh.doctor_reports()["flashinfer"] == ["(moe_core_doctor raised RuntimeError: report exploded (test))"]


def test_module_prints_the_same_lines(monkeypatch, capsys):
    monkeypatch.setattr(report, "lines", lambda: ["line one (test)", "line two (test)"])
    assert cli.main([]) == 0
    assert capsys.readouterr().out == "line one (test)\nline two (test)\n"


def test_moe_core_doctor_prints_the_plugins_lines():
    out = subprocess.run([sys.executable, "-m", "moe_core.cli", "doctor"], capture_output=True, text=True).stdout
    assert "flashinfer:" in out.splitlines(), out
    assert f"  flashinfer-python: {facts.version()}" in out and "  JIT toolchains:" in out
