# Sourced by the GPU capture scripts (studies/gpu_capture.sh, studies/gpu_unseen.sh), after they
# set `out` (OUT_DIR) and `tag` (GPU_TAG): a scratch folder `cap` holding the GPU and software
# versions (gpu.txt), `step` to run one capture with a time limit, and `pack` to put the folder
# into OUT_DIR/capture.tgz (split into 15 MB parts when larger).
cap=$(mktemp -d)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$cap/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), 'nccl', torch.cuda.nccl.version())" | tee -a "$cap/gpu.txt"

step() {  # step SECONDS NAME CMD...: run CMD with a time limit, log its tail and its status
  local limit=$1 name=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$cap/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc in $((SECONDS - t0)) s"; tail -n 3 "$cap/$name.log"
}

pack() {
  mkdir -p "$out"
  tar -C "$cap" -czf "$out/capture.tgz" .
  if [ "$(stat -c %s "$out/capture.tgz")" -gt 15000000 ]; then
    split -b 15000000 -d "$out/capture.tgz" "$out/capture.tgz.part" && rm "$out/capture.tgz"
  fi
  ls -la "$out"
}
