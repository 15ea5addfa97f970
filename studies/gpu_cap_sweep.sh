#!/usr/bin/env bash
# Real DDP at several bucket_cap_mb on one CUDA GPU (one NCCL rank), each round in ONE executor
# launch with a slice of the trace captured right before each point (`executor round`), and
# torch.profiler profiles of DDP at a 1 MiB cap (one bucket per parameter or two): what each
# bucket costs beyond its kernel, bucket by bucket. Read back by `python studies/gpu_cap_sweep.py`.
# One GPU cannot host two NCCL ranks: no all-reduce crosses a link; the Reducer's host work, the
# copies into and out of the buckets and ProcessGroupNCCL's enqueue are real.
#
#   bash studies/gpu_cap_sweep.sh OUT_DIR [GPU_TAG]     (SKIP_PROFILES=1: the rounds alone)
#
# Two rounds per model, the caps in opposite orders, so that a drift in the launch's speed shows
# as a difference between rounds rather than as a cap's cost. Everything lands in OUT_DIR/capture.tgz.
set -u
out=${1:?usage: gpu_cap_sweep.sh OUT_DIR [GPU_TAG]}
tag=${2:-h100}
. "$(dirname "$0")/gpu_common.sh"

round() {  # round SECONDS NAME ROUND CAPS ARGS...
  local limit=$1 name=$2 r=$3 caps=$4; shift 4
  step "$limit" "round-$name.$r" torchrun --nproc-per-node 1 -m executor round --caps "$caps" --round "$r" \
    --iterations 20 --warmup 5 --out-dir "$cap/rounds-$name" "$@"
}
for r in 1 2; do
  caps=none,1,5,25,100; [ "$r" = 2 ] && caps=100,25,5,1,none
  round 65 resnet50 "$r" "$caps" --model resnet50 --batch-size 32
  round 65 gpt2-124m "$r" "$caps" --model gpt2-124m --batch-size 8 --model-arg seq_len=1024
  round 65 bert-base "$r" "$caps" --model bert-base --batch-size 32 --model-arg seq_len=128
done

profile() {  # profile SECONDS NAME ARGS...
  local limit=$1 name=$2; shift 2
  step "$limit" "profile-$name" torchrun --nproc-per-node 1 -m executor profile --warmup 5 --active 2 \
    --bucket-cap-mb 1 --autocast bf16 --out-dir "$cap/$name-cap1-1x$tag" "$@"
}
if [ "${SKIP_PROFILES:-0}" != 1 ]; then
  profile 80 gpt2-124m --model gpt2-124m --batch-size 16 --model-arg seq_len=1024
  profile 80 resnet50 --model resnet50 --batch-size 64
fi

pack
