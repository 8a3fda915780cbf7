"""The per-user directory for files moe-core writes (moe_core/user_dirs.py)."""

from pathlib import Path

import pytest

from moe_core import env
from moe_core.errors import InvalidEnvironmentError
from moe_core.user_dirs import CACHE_DIR, cache_dir, cache_path


def test_the_variable_wins(tmp_path):
    assert cache_dir({CACHE_DIR: str(tmp_path), "XDG_CACHE_HOME": "/elsewhere"}) == tmp_path


def test_xdg_then_home():
    assert cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}) == Path("/var/cache/me/moe-core")
    assert cache_dir({}) == Path.home() / ".cache" / "moe-core"
    assert cache_dir({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache" / "moe-core"  # the XDG spec ignores relative paths


def test_a_relative_directory_is_an_error_that_names_the_variable():
    with pytest.raises(InvalidEnvironmentError, match=f"{CACHE_DIR}='cache': not an absolute path.*Fix or unset {CACHE_DIR}"):
        cache_dir({CACHE_DIR: "cache"})


def test_cache_path_creates_only_when_asked(tmp_path):
    environ = {CACHE_DIR: str(tmp_path / "c")}
    path = cache_path("tuned", "x.json", environ=environ)
    assert path == tmp_path / "c" / "tuned" / "x.json" and not path.parent.exists()
    assert cache_path("tuned", "x.json", environ=environ, create=True).parent.is_dir()


def test_not_reported_as_an_unknown_variable():
    assert env.unknown_variables({CACHE_DIR: "/tmp/x"}) == []
