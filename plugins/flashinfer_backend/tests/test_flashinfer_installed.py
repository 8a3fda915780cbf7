"""CI installs flashinfer-python (scripts/bootstrap.sh); there, a failed install must fail the run, not skip the plugin's tests."""

import importlib.util
import os

import pytest


@pytest.mark.skipif(os.environ.get("CI", "").lower() not in ("1", "true", "yes"),
                    reason="outside CI flashinfer-python is optional (an offline GPU image may lack it)")
def test_ci_has_flashinfer_so_the_provider_tests_ran():
    assert importlib.util.find_spec("flashinfer") is not None, (
        "flashinfer-python is not importable in CI: scripts/bootstrap.sh could not install it "
        "(see its 'could not install the provider' line), so the FlashInfer tests were skipped")
