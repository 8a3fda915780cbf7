"""Rankings in force: the shipped rankings (H100, H200), plugin-contributed rankings, precedence, versions, lookup."""

import itertools
import json
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moe_core import autotune_cache, quant
from moe_core.cli import main
from moe_core.config import MoEConfig
from moe_core.errors import RankingFileError
from moe_core.hookspecs import hookimpl
from moe_core.platform import PRESETS, DeviceKind, preset
from moe_core.presets import model
from moe_core.ranking import MeasuredWith, Ranking, RankingEntry, use_ranking
from moe_core.ranking_sources import SHIPPED_DIR, installed_version
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.resolver import current_platform, select
from moe_core.selection import SelectionSource
from moe_core.spec import BackendSpec

H100 = preset("h100")
SHIPPED_FILES = sorted(SHIPPED_DIR.glob("*.json"))
SHIPPED = Ranking.load(SHIPPED_DIR / "nvidia-h100-80gb-hbm3.json")
DETERMINISTIC = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _no_user_ranking():
    use_ranking(None)
    autotune_cache.forget()
    yield
    use_ranking(None)
    autotune_cache.forget()


def _config(entry: RankingEntry) -> MoEConfig:
    return MoEConfig(num_experts=entry.num_experts, top_k=entry.top_k, hidden_size=entry.hidden_size,
                     intermediate_size=entry.intermediate_size, dtype=getattr(torch, entry.dtype))


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.stem)
def test_every_shipped_entry_decides_on_a_simulated_gpu_of_its_device(path, tmp_path):
    shipped = Ranking.load(path)
    platform = next(p for p in PRESETS.values() if p.device_name == shipped.device)  # every shipped device has a preset
    reg = Registry(environ={})  # every installed plugin
    env = {"MOE_CORE_CACHE_DIR": str(tmp_path)}  # no autotune cache of this machine interferes
    overridden = 0
    for entry in shipped.entries:
        sch = quant.scheme(entry.scheme)
        cfg = _config(entry)
        static = select(cfg, sch.weight_key, sch.activation_key, platform=platform, registry=reg, environ=env)
        eligible = [c.name for c in static.candidates if c.eligible]
        fastest = next((name for name in entry.order if name in eligible), None)
        for tokens in {entry.tokens_min, entry.tokens_max}:
            chosen = select(cfg, sch.weight_key, sch.activation_key, platform=platform, registry=reg, environ=env, num_tokens=tokens)
            if fastest is None:
                assert chosen.name == static.name and chosen.source is SelectionSource.PRIORITY
                continue
            assert (chosen.name, chosen.source) == (fastest, SelectionSource.RANKING), (entry, tokens)
            assert chosen.decided_by.startswith(f"measured: shipped ranking for {shipped.device}, 2026-")
            overridden += chosen.name != static.name
    if {"triton", "deepgemm"} <= set(reg.specs):
        assert overridden > 0  # the measurement really moves choices away from the static priority


def test_shipped_ranking_is_only_used_on_its_device():
    cfg = model("deepseek-v3").config()
    sch = quant.scheme("fp8-block")
    shipped_devices = {Ranking.load(path).device for path in SHIPPED_FILES}
    for name in ("b200", "a100", "cpu"):
        assert preset(name).device_name not in shipped_devices
        chosen = select(cfg, sch.weight_key, sch.activation_key, platform=preset(name), num_tokens=64, environ={})
        assert "shipped" not in chosen.decided_by and chosen.source is not SelectionSource.RANKING


def test_deepseek_fp8_block_decode_is_triton_not_the_priority_choice():
    reg = Registry(environ={})
    if not {"triton", "deepgemm"} <= set(reg.specs):
        pytest.skip("needs the triton and deepgemm plugins installed")
    cfg = model("deepseek-v3").config()
    sch = quant.scheme("fp8-block")
    assert select(cfg, sch.weight_key, sch.activation_key, platform=H100, registry=reg, environ={}).name == "deepgemm"
    chosen = select(cfg, sch.weight_key, sch.activation_key, platform=H100, registry=reg, environ={}, num_tokens=64)
    assert chosen.name == "triton" and "measured: shipped ranking for NVIDIA H100 80GB HBM3" in chosen.explain()


# ---------------------------------------------------------------- precedence over fake backends on a simulated H100

def _fake(name, prio):
    return BackendSpec(name=name, family="fakes", priority=prio, schemes=[quant.scheme("fp8-block")], kernel=ReferenceKernel,
                       devices={DeviceKind.CUDA})


class Fakes:
    """deepgemm / triton stand-ins (the shipped DeepSeek entry orders them) and one backend per source to tell them apart."""

    @hookimpl
    def moe_core_backends(self):
        return [_fake("deepgemm", 700), _fake("triton", 500), _fake("by_user", 10), _fake("by_autotune", 10), _fake("by_plugin", 10)]


DS = model("deepseek-v3").config()
FP8 = quant.scheme("fp8-block")
DEVICE = H100.device_name


def _ranking(first: str, device: str = DEVICE, versions=()) -> Ranking:
    entry = RankingEntry(DS.num_experts, DS.top_k, DS.hidden_size, DS.intermediate_size, "bfloat16", "fp8-block", 33, 128,
                         (first, "triton"))
    return Ranking(device, (entry,), MeasuredWith(tuple(versions), "2026-11-28T00:00:00+00:00", "test"))


class RankingPlugin:
    def __init__(self, *rankings):
        self.rankings = rankings

    @hookimpl
    def moe_core_rankings(self):
        return list(self.rankings)


@pytest.mark.parametrize("api,file,tuned,plugin,asked",
                         list(itertools.product([False, True], [False, True], [False, True], [False, True], [None, "deepgemm", "by_plugin"])))
def test_precedence(api, file, tuned, plugin, asked):
    """request > use_ranking() > MOE_CORE_RANKING_FILE > autotune cache > plugin > shipped > priority, every combination."""
    with tempfile.TemporaryDirectory() as tmp:
        reg = Registry(autoload=False, environ={})
        reg.register(Fakes(), name="fakes")
        env = {"MOE_CORE_CACHE_DIR": tmp}
        if plugin:
            reg.register(RankingPlugin(_ranking("by_plugin"), _ranking("by_user", device="AMD Instinct MI300X")), name="ranker")
        if file:
            path = Path(tmp, "user.json")
            _ranking("by_user").save(path)
            env["MOE_CORE_RANKING_FILE"] = str(path)
        use_ranking(_ranking("by_user") if api else None)
        if tuned:
            cache = autotune_cache.cache_file(DEVICE, env)
            autotune_cache.write(cache, DEVICE, _ranking("by_autotune").entries, MeasuredWith())
        autotune_cache.forget()
        if asked:
            env["MOE_CORE_BACKEND"] = asked
        chosen = select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ=env, num_tokens=64)
        if asked:
            expected, label = asked, None
        elif api:
            expected, label = "by_user", "measured: moe_core.ranking.use_ranking()"
        elif file:
            expected, label = "by_user", "measured: MOE_CORE_RANKING_FILE"
        elif tuned:
            expected, label = "by_autotune", "measured: autotune cache"
        elif plugin:
            expected, label = "by_plugin", "measured: ranking of plugin ranker for NVIDIA H100 80GB HBM3"
        else:
            expected, label = "triton", "measured: shipped ranking for NVIDIA H100 80GB HBM3"
        assert chosen.name == expected
        if label is None:
            assert chosen.source is SelectionSource.ENV and chosen.decided_by == ""
        else:
            assert chosen.source is SelectionSource.RANKING and chosen.decided_by.startswith(label)
        # Outside every bucket of every source: the static priority, and explain says why.
        far = select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ=env, num_tokens=10**7)
        if not asked:
            assert far.name == "deepgemm" and far.decided_by == "by priority: no measurement for this shape"


def test_plugin_rankings_from_paths_and_broken_ones_are_problems(tmp_path):
    good = tmp_path / "good.json"
    _ranking("by_plugin").save(good)
    reg = Registry(autoload=False, environ={})
    reg.register(Fakes(), name="fakes")
    reg.register(RankingPlugin(str(good), tmp_path / "missing.json"), name="ranker")
    assert [(p, r.device) for p, r in reg.rankings] == [("ranker", DEVICE)]
    assert any(p.stage == "moe_core_rankings" and "missing.json" in p.message for p in reg.problems)
    chosen = select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ={"MOE_CORE_CACHE_DIR": str(tmp_path)},
                    num_tokens=64)
    assert chosen.name == "by_plugin"
    reg.unregister("ranker")
    assert reg.rankings == ()
    assert select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ={"MOE_CORE_CACHE_DIR": str(tmp_path)},
                  num_tokens=64).name == "triton"


# ---------------------------------------------------------------- versions, format, lookup

def test_explain_says_when_installed_versions_differ(tmp_path):
    reg = Registry(autoload=False, environ={})
    reg.register(Fakes(), name="fakes")
    env = {"MOE_CORE_CACHE_DIR": str(tmp_path)}
    use_ranking(_ranking("by_user", versions=[("torch", "0.0.1-measured"), ("triton", installed_version("triton") or "x")]))
    text = select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ=env, num_tokens=64).explain()
    assert f"installed versions differ: torch {torch.__version__} (measured with 0.0.1-measured); the ranking is used all the same" in text
    assert "triton" not in text.split("installed versions differ")[1].split(";")[0]  # same triton: not listed
    use_ranking(_ranking("by_user", versions=[("torch", torch.__version__)]))
    text = select(DS, FP8.weight_key, FP8.activation_key, platform=H100, registry=reg, environ=env, num_tokens=64).explain()
    assert "=> by_user (by ranking; measured: moe_core.ranking.use_ranking(), 2026-11-28)" in text and "differ" not in text


def test_files_without_versions_load_and_versions_round_trip(tmp_path):
    old = {"format": "moe-core-ranking/1", "device": DEVICE, "entries": [json.loads(json.dumps(_ranking("x").to_dict()["entries"][0]))]}
    assert Ranking.from_dict(old).measured_with == MeasuredWith()
    path = tmp_path / "r.json"
    original = _ranking("x", versions=[("torch", "2.11.0+cu130"), ("deep_gemm", "2.6.1")])
    original.save(path)
    assert Ranking.load(path) == original
    with pytest.raises(RankingFileError, match="measured_with.versions must map package names to version strings"):
        Ranking.from_dict({**old, "measured_with": {"versions": {"torch": 2}}}, "f.json")


entries = st.builds(
    lambda shape, lo, width, name: RankingEntry(4, 2, shape, 16, "float32", "unquantized", lo, lo + width, (name,)),
    st.sampled_from([32, 64]), st.integers(1, 40), st.integers(0, 20), st.sampled_from(["a", "b", "c"]),
)


@DETERMINISTIC
@given(st.lists(entries, max_size=12), st.sampled_from([32, 64, 128]), st.integers(1, 70))
def test_indexed_lookup_equals_the_first_matching_entry(items, hidden, tokens):
    ranking = Ranking("d", tuple(items))
    shape = (4, 2, hidden, 16, "float32", "unquantized")
    naive = next((i for i, e in enumerate(items) if e.shape == shape and e.tokens_min <= tokens <= e.tokens_max), None)
    assert ranking.entry_for(shape, tokens) == naive


def test_doctor_lists_the_rankings_in_force(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path))
    path = tmp_path / "mine.json"
    _ranking("x", device="cpu").save(path)
    monkeypatch.setenv("MOE_CORE_RANKING_FILE", str(path))
    main(["doctor"])
    out = capsys.readouterr().out
    assert f"rankings in force for {current_platform().device_name}" in out
    assert f"MOE_CORE_RANKING_FILE {path}, 2026-11-28: 1 entries" in out
    path.write_text("{broken")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"rankings: {path}: not valid JSON" in out and "status: problems found" in out
