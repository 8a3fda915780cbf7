"""moe-core plugin binding AMD AITER's fused MoE (``aiter.fused_moe``) on ROCm gfx942/gfx950.

The ``aiter`` package is imported only when the backend runs (:mod:`moe_core_aiter.provider`);
importing this plugin or selecting a backend never imports it.
"""
