"""moe-core plugin running vLLM's compiled Marlin MoE GEMM for weight-only schemes on CUDA.

The provider is one file, vLLM's Marlin ops library, loaded at the first forward
(:mod:`moe_core_marlin.library`); importing this plugin or selecting a backend never loads it, and
vLLM's Python is never imported. Repacking (:mod:`moe_core_marlin.repack`) and the glue between the
GEMMs (:mod:`moe_core_marlin.glue`) are the plugin's own.
"""
