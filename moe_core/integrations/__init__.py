"""moe-core inside other frameworks.

:mod:`moe_core.integrations.custom_op` exposes the kernel call as the torch custom op
``moe_core::fused_experts`` (so ``torch.compile`` traces through it);
:mod:`moe_core.integrations.transformers` registers moe-core as a Hugging Face transformers
experts implementation (``experts_implementation="moe_core"``). See docs/integrations.md.
"""
