#!/usr/bin/env bash
# Real DDP with and without gradient_as_bucket_view on one CUDA GPU (one NCCL rank): what the
# gradients' copies into and out of the buckets cost on the device, the engine's copy-kernel term
# (ddpsim/network/cost_terms.py). Per model four rounds of `executor round` at caps default and 1,
# alternating copies / views / views / copies, each round ONE launch with a trace slice before each
# point; the rounds' cap=*.run*.json hold the step times. One GPU cannot host two NCCL ranks.
#
#   bash studies/gpu_bucket_view.sh OUT_DIR [GPU_TAG]
set -u
out=${1:?usage: gpu_bucket_view.sh OUT_DIR [GPU_TAG]}
tag=${2:-h100}
. "$(dirname "$0")/gpu_common.sh"

round() {  # round NAME ROUND LAYOUT ARGS...
  local name=$1 r=$2 layout=$3; shift 3
  local view=(); [ "$layout" = views ] && view=(--gradient-as-bucket-view)
  step 60 "round-$name-$layout.$r" torchrun --nproc-per-node 1 -m executor round --caps none,1 --round "$r" \
    --iterations 20 --warmup 5 --out-dir "$cap/$layout-$name" "${view[@]}" "$@"
}
r=0
for layout in copies views views copies; do
  r=$((r + 1))
  round gpt2-124m "$r" "$layout" --model gpt2-124m --batch-size 8 --model-arg seq_len=1024
  round bert-base "$r" "$layout" --model bert-base --batch-size 32 --model-arg seq_len=128
done
pack
