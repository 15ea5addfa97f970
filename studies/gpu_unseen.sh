#!/usr/bin/env bash
# Capture, on one CUDA GPU, measured traces of models whose re-timed traces are not yet scored
# against a real GPU -- GPT-2 350M, the mlp and the zoo's torch-only models (and its torchvision
# ones where torchvision loads) -- and one real DDP profile (one NCCL rank, torch.profiler) of
# GPT-2 350M read back by `ddpsim trace --from-profile`. The settings are ones a CPU can also
# capture, so that `ddpsim retime` of the CPU trace can be scored against each (traces/README.md).
# One GPU cannot host two NCCL ranks: the profile's all-reduces are local; the reducer's work is real.
#
#   bash studies/gpu_unseen.sh OUT_DIR [GPU_TAG]
#
# Each capture is independent: one that fails is logged and the rest go on. Everything lands in
# OUT_DIR/capture.tgz.
set -u
out=${1:?usage: gpu_unseen.sh OUT_DIR [GPU_TAG]}
tag=${2:-h100}
. "$(dirname "$0")/gpu_common.sh"

trace() {  # trace SECONDS FILE_STEM MODEL ARGS...
  local limit=$1 stem=$2 model=$3; shift 3
  step "$limit" "trace-$stem" python3 -m ddpsim trace --device cuda --model "$model" --iterations 10 --warmup 3 \
    --out "$cap/$stem.measured.$tag.json" "$@"
}
trace 90 gpt2-350m.b4-s512 gpt2-350m --batch-size 4 --set seq_len=512 --set autocast=bf16
trace 60 mlp mlp --batch-size 32
trace 60 transformer_encoder.b64 zoo:transformer_encoder --batch-size 64 --set autocast=bf16
trace 60 transformer_seq2seq.b64 zoo:transformer_seq2seq --batch-size 64 --set autocast=bf16
trace 60 tied_lm.b64 zoo:tied_lm --batch-size 64 --set autocast=bf16
trace 60 branchy_mlp zoo:branchy_mlp --batch-size 256 --set autocast=bf16
trace 60 vit_small.b64 zoo:vit_small --batch-size 64 --set autocast=bf16
trace 60 resnet18.b64 zoo:resnet18 --batch-size 64 --set input_shape=3,224,224 --set autocast=bf16

step 120 profile-gpt2-350m torchrun --nproc-per-node 1 -m executor profile --model gpt2-350m --batch-size 4 \
  --model-arg seq_len=512 --autocast bf16 --warmup 5 --active 3 --out-dir "$cap/gpt2-350m-1x$tag"
step 60 import-gpt2-350m python3 -m ddpsim trace --from-profile "$cap/gpt2-350m-1x$tag/rank0.json.gz" --model gpt2-350m \
  --out "$cap/gpt2-350m.b4-s512.profiled.$tag.json"
cat "$cap/import-gpt2-350m.log" | head -n 40

pack
