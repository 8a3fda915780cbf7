import os

import pytest

from moe_core import resolver
from moe_core.registry import reset_default_registry


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch):
    """Every test starts with no MOE_CORE_* variable, an empty selection cache and a fresh default registry."""
    for key in list(os.environ):
        if key.startswith("MOE_CORE_") or key.startswith("VLLM_"):
            monkeypatch.delenv(key)
    resolver.clear_cache()
    reset_default_registry()
    yield
    resolver.clear_cache()
    reset_default_registry()
