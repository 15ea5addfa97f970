#!/usr/bin/env bash
# Real DDP on one CUDA GPU (one NCCL rank) beside a trace captured on the same GPU, to check
# ddpsim's plan (DDP's own rebuilt buckets, plan_matches) and its single-rank step prediction.
# One GPU cannot host two NCCL ranks: the all-reduces are local, the reducer's work is real.
#
#   bash studies/gpu_ddp_check.sh OUT_DIR [GPU_TAG]
set -u
out=${1:?usage: gpu_ddp_check.sh OUT_DIR [GPU_TAG]}
tag=${2:-h100}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
check() {  # check MODEL BATCH SEQ
  local model=$1 batch=$2 seq=$3 t0=$SECONDS
  local extra=() margs=()
  if [ "$seq" != - ]; then extra=(--set "seq_len=$seq"); margs=(--model-arg "seq_len=$seq"); else extra=(--set input_shape=3,224,224); fi
  timeout 150 python3 -m ddpsim trace --device cuda --model "$model" --batch-size "$batch" "${extra[@]}" \
    --iterations 10 --warmup 3 --out "$out/$model.fp32.measured.$tag.json" >"$out/trace-$model.log" 2>&1
  echo "== trace $model: rc $? in $((SECONDS - t0)) s"; tail -n 2 "$out/trace-$model.log"
  t0=$SECONDS
  timeout 150 torchrun --nproc-per-node 1 -m executor ddp --model "$model" --batch-size "$batch" "${margs[@]}" \
    --iterations 20 --warmup 5 --trace "$out/$model.fp32.measured.$tag.json" --out "$out/ddp-$model.$tag.json" \
    >"$out/ddp-$model.log" 2>&1
  echo "== ddp $model: rc $? in $((SECONDS - t0)) s"; grep -E "plan_matches|iteration median" "$out/ddp-$model.log" | tail -n 3
}
check gpt2-124m 8 1024
check resnet50 32 -
ls -la "$out"
