import os

import torch

# transformers' fine-grained fp8 module imports triton.language, and Triton reads TRITON_INTERPRET
# when first imported: without a GPU, set it here as the plugins' conftests do, before this
# directory's test modules import transformers, or the plugins' interpreted kernels break later.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
