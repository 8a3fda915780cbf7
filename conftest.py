"""Repository-wide pytest set-up, loaded before any test module of the core, the plugins or the examples.

Without a GPU the Triton kernels run in the interpreter. Triton reads TRITON_INTERPRET when it is
first imported, and some test modules import it indirectly (transformers' fine-grained fp8 module
imports triton.language), so it is set here, before every test directory. Each plugin's own
conftest sets it too, for when its tests run outside this repository.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
