# GPU call 1 (2026-11-27, session 44): the K loop's trip count known to be at least one (gemm.py, `last =
# tl.maximum(k_tiles, 1)`), so that no path around the loop zeroes the accumulators between a wgmma and its wait.
# (1) the A/B, then (2) ptxas's verdict (C7515: wgmma serialized) on every GEMM the layers compile, the plugin as committed (d48db67,
# renamed moe_core_triton_old in .scratch/s44_old, not committed) and with the change, each in a Triton cache of its
# own. The A/B in one process (session 34's ab.py) of the layers whose GEMMs the CPU machine's compile found
# serialized, and w8a16 (none serialized) as a control.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; H=$D/h100-2026-11-27-s44
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
for args in "presets=mixtral-8x7b,qwen3-30b-a3b schemes=mxfp4,w4a16,nvfp4-w4a16 tokens=16,1,64" \
            "presets=gpt-oss-20b schemes=mxfp4 tokens=16,1,64" "presets=mixtral-8x7b,qwen3-30b-a3b schemes=w8a16 tokens=16,64"; do
  left=$(( s + 430 - $(date +%s) )); [ $left -lt 30 ] && break
  PYTHONPATH=$PWD/.scratch/s44_old timeout $left python3 $D/h100-2026-11-25-s34/ab.py $args >> $OUT/ab1.txt 2>&1
  echo "ab ($args) rc=$? after $(( $(date +%s) - s )) s"
done
grep -v -i warn $OUT/ab1.txt
W="schemes=w4a16,mxfp4,nvfp4-w4a16 tokens=1,16,64"
(TRITON_CACHE_DIR=/tmp/tc_old PYTHONPATH=$PWD/.scratch/s44_old timeout $(( s + 560 - $(date +%s) )) python3 $H/warm.py moe_core_triton_old $W > $OUT/warm1_old.txt 2>&1
 python3 $H/ptxas_check.py /tmp/tc_old > $OUT/ptxas1_old.txt 2>&1) &
(TRITON_CACHE_DIR=/tmp/tc_new timeout $(( s + 560 - $(date +%s) )) python3 $H/warm.py moe_core_triton $W > $OUT/warm1_new.txt 2>&1
 python3 $H/ptxas_check.py /tmp/tc_new > $OUT/ptxas1_new.txt 2>&1) &
wait; echo "ptxas checks after $(( $(date +%s) - s )) s"; tail -n 1 $OUT/warm1_*.txt $OUT/ptxas1_*.txt
