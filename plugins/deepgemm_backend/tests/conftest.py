import os

import torch

# Without a GPU, run the Triton glue kernels in the interpreter (numpy on the CPU). Must be set
# before the kernels are first compiled.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
