"""Without a GPU, Marlin's Triton routing guard runs in Triton's interpreter (set before Triton is imported)."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
