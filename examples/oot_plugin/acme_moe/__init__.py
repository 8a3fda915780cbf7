"""ACME's fused-MoE backend for moe-core (an example of an out-of-tree plugin)."""
