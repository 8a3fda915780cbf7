"""moe-core-triton: fused-MoE kernels written in Triton, registered as backends `triton` and `triton_batched`."""
