"""Session 33, call 9: would fp8 weight-only decode keep its speed on codes in fragment order? The tuner's full search
for Qwen3-30B-A3B fp8-w8a16 at 16 tokens, with WeightOnly.permutes patched to take e4m3 codes too (the committed rule
takes int4 only) and the result written to a file outside the package. Compare with the bench of call 3 (157.0 us for
the layer in K order) and call 5's refined swapped tiles (123.2 + 54.0 us of GEMM steps).

    python fp8_probe.py OUT.json
"""
import sys

from moe_core_triton import kernel, tune

int4_rule = kernel.WeightOnly.permutes


def int4_or_e4m3(self, k):
    e4m3 = self.codes == 2 and kernel.whole_chunks(k)
    return int4_rule(self, k) or e4m3


kernel.WeightOnly.permutes = int4_or_e4m3
sys.exit(tune.main(["--preset", "qwen3-30b-a3b", "--scheme", "fp8-w8a16", "--tokens", "16", "--out", sys.argv[1]]))
