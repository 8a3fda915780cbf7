"""Test support for moe-core and for plugin packages: fakes, Hypothesis strategies, conformance checks.

Import the submodules you need (``moe_core.testing.strategies`` needs Hypothesis installed).
"""
