# GPU call 4 (2026-11-27, session 39): 4-bit codes made 16-bit values by PTX that takes each byte twice and gives a
# byte's two values in one register (gemm.nibble_values_by_ptx), instead of low- and high-nibble values interleaved
# after the PTX. The weight-only GPU tests of the 4-bit schemes (PTX value tests over every byte, GEMMs against the
# reference); then the in-process A/B against the same tree with the interleaving PTX (.scratch/s39_nodup, its
# gemm.py without the duplicated-byte PTX, renamed moe_core_triton_old; not committed) with session 34's ab.py.
# The int4 PTX of this call had a wrong byte selector (0x4040 / 0x6262 where 0x0400 / 0x0602 was meant): its int4
# tests failed and its int4 outputs were wrong; the committed code keeps int4's interleaved PTX (weight-only-h100.md).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-27-s39
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
T=plugins/triton_backend/tests
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py -k "(w4a16 or mxfp4 or e2m1 or int4) and not w8a16" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 200 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests4_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests4_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests4_*.txt | head -20
PYTHONPATH=$PWD/.scratch/s39_nodup timeout $(( s + 585 - $(date +%s) )) python3 $D/../h100-2026-11-25-s34/ab.py \
  schemes=unquantized,w4a16,w4a16-zp,mxfp4,nvfp4-w4a16 tokens=1,16,64,4096 > $OUT/ab4.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab4.txt
