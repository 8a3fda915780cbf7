"""moe-core plugin binding FlashInfer's fused-MoE backends through its unified MoE API.

FlashInfer is imported only when a FlashInfer backend is asked about on a CUDA platform that has
it (its own ``supported(arch)`` answers) or runs; importing this plugin never imports it.
"""
