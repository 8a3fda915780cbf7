# A full tile search (moe_core_triton.tune, no --refine) of several (preset, scheme) pairs in one GPU call, in two
# phases: (1) one process per (preset, scheme, token count) at once, which compiles every candidate into Triton's
# cache (their timings, taken side by side, are thrown away); (2) one process per (preset, scheme) after another,
# which times every candidate alone, now read from the cache, and writes the package's data file.
#   bash search.sh TAG DEADLINE_EPOCH TOKENS preset:scheme[:tokens] ...    ($OUT: where logs go; TOKENS: the default)
tag=$1; deadline=$2; default=$3; shift 3
export OMP_NUM_THREADS=1
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
t0=$(date +%s)
for spec in "$@"; do
  IFS=: read -r preset name tokens <<< "$spec"
  for t in $(echo ${tokens:-$default} | tr , ' '); do
    timeout $(( deadline - $(date +%s) )) python3 -m moe_core_triton.tune --preset $preset --scheme $name --tokens $t \
      --out /tmp/warm_${preset}_${name}_$t.json > /tmp/warm_${preset}_${name}_$t.log 2>&1 &
  done
done
wait
echo "$tag compile phase: $(( $(date +%s) - t0 )) s"
for spec in "$@"; do
  IFS=: read -r preset name tokens <<< "$spec"
  timeout $(( deadline - $(date +%s) )) python3 -m moe_core_triton.tune --preset $preset --scheme $name --tokens ${tokens:-$default} 2>&1 \
    | grep -v -i "warn\|skip" >> $OUT/tune_$tag.txt
  echo "$tag $spec: rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
  cp $C $OUT/configs_after_$tag.json
done
