"""moe-core plugin running vLLM's compiled CUTLASS grouped fp8 GEMM (``cutlass_moe_mm``) on CUDA sm90+.

The provider is one file, vLLM's ``_C`` ops library, loaded at the first forward
(:mod:`moe_core_vllm_cutlass.library`); importing this plugin or selecting a backend never loads it,
and vLLM's Python is never imported. The glue between the GEMMs (:mod:`moe_core_vllm_cutlass.glue`)
is the plugin's own torch code.
"""
