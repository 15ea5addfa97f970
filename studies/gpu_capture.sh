#!/usr/bin/env bash
# Capture, on one CUDA GPU, the measured traces and DDP profiles that score ddpsim's GPU
# predictions: `ddpsim trace --device cuda` of the bundled models at the settings their
# re-timed traces use (traces/README.md), and `executor profile` (real DDP, one NCCL rank,
# torch.profiler) of three of them. One GPU cannot host two NCCL ranks, so the profiles are of
# world size 1: DDP's reducer, buckets and NCCL kernels run, the transfer is a local copy.
#
#   bash studies/gpu_capture.sh OUT_DIR [GPU_TAG]
#
# GPU_TAG (default h100) names the files: traces/<model>.measured.<tag>.json and
# <model>-1x<tag>/rank0.json.gz. Each capture is independent: one that fails is logged and the
# rest go on. Everything lands in OUT_DIR/capture.tgz (split into 15 MB parts when larger).
set -u
out=${1:?usage: gpu_capture.sh OUT_DIR [GPU_TAG]}
tag=${2:-h100}
. "$(dirname "$0")/gpu_common.sh"

trace() {  # trace SECONDS MODEL ARGS...
  local limit=$1 model=$2; shift 2
  step "$limit" "trace-$model" python3 -m ddpsim trace --device cuda --model "$model" --iterations 10 --warmup 3 \
    --out "$cap/$model.measured.$tag.json" "$@"
}
trace 120 gpt2-124m --batch-size 16 --set seq_len=1024 --set autocast=bf16
trace 120 resnet50 --batch-size 64 --set input_shape=3,224,224 --set autocast=bf16
trace 120 bert-base --batch-size 32 --set seq_len=128 --set autocast=bf16
step 60 trace-resnet50-fp32 python3 -m ddpsim trace --device cuda --model resnet50 --batch-size 32 --set input_shape=3,224,224 \
  --iterations 10 --warmup 3 --out "$cap/resnet50.fp32-b32.measured.$tag.json"

profile() {  # profile SECONDS MODEL ARGS...
  local limit=$1 model=$2; shift 2
  step "$limit" "profile-$model" torchrun --nproc-per-node 1 -m executor profile --model "$model" --warmup 5 --active 3 \
    --out-dir "$cap/$model-1x$tag" "$@"
}
profile 120 resnet50 --batch-size 64 --autocast bf16
profile 120 gpt2-124m --batch-size 16 --model-arg seq_len=1024 --autocast bf16
profile 120 bert-base --batch-size 32 --model-arg seq_len=128 --autocast bf16

trace 200 gpt2-1.5b --batch-size 8 --set seq_len=1024 --set autocast=bf16 --iterations 5 --warmup 2

pack
