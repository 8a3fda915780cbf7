"""moe-core plugin binding DeepGEMM's grouped GEMMs (fp8 block-scaled and bf16) with moe-core's Triton glue."""
