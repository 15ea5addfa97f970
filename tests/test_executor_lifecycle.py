"""The executor's lifecycle, each check in a process of its own: outside torchrun, imports,
a dead peer, the steady allocator (executor.runtime, executor.__main__).

The processes are the point here (no torchrun environment, an import blocker, a killed rank,
a fresh heap); the executor's steps under torchrun are tests/test_executor.py's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpsim.errors import InputError
from ddpsim.validation.launch import REPO_ROOT, free_port
from executor.runtime import read_env

pytestmark = pytest.mark.slow


def test_read_env_names_missing_and_bad_variables():
    with pytest.raises(InputError, match="RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT not set; expected to run under torchrun"):
        read_env({})
    base = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert read_env(base).world_size == 2
    with pytest.raises(InputError, match=r"RANK=2 is not accepted; expected 0 <= RANK < WORLD_SIZE \(2\)"):
        read_env({**base, "RANK": "2"})
    with pytest.raises(InputError, match="WORLD_SIZE='two' is not accepted; expected an integer"):
        read_env({**base, "WORLD_SIZE": "two"})


def test_outside_torchrun_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    r = subprocess.run([sys.executable, "-m", "executor", "collectives", "--out", str(tmp_path / "c.json")],
                       env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("executor: error: environment: RANK, WORLD_SIZE")


BLOCKER = r"""
import sys
BLOCKED = {"simpy", "pandas", "matplotlib", "networkx", "yaml"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"executor must not import {name}")
        return None
sys.meta_path.insert(0, Block())
import executor, executor.__main__, executor.runtime, executor.collectives_step, executor.ddp_step
import executor.replay, executor.workload, executor.capture_step
executor.__main__.build_parser()
# what the steps import lazily
import ddpsim.trace.models, ddpsim.plan.planner, ddpsim.trace.records, ddpsim.units, ddpsim.io, ddpsim.errors, ddpsim.formats, ddpsim.trace.capture, ddpsim.network.curve_fit
ddpsim.trace.models.build_model("mlp")
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_executor_imports_with_only_torch():
    r = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok []"


def test_a_dead_rank_makes_the_other_exit_within_the_timeout(tmp_path):
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "executor", "collectives", "--timeout-s", "8", "--num-threads", "1",
             "--out", str(tmp_path / "c.json"), "--max-bytes", "64MiB", "--repeats", "200", "--skip-interference"],
            env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "c.progress.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # both ranks are now deep in collectives (rank 0 got past init); kill rank 1
        time.sleep(0.5)
        assert procs[0].poll() is None
        procs[1].send_signal(signal.SIGKILL)
        t = time.monotonic()
        try:
            _, err = procs[0].communicate(timeout=8 + 5 + 20)
        except subprocess.TimeoutExpired:
            pytest.fail("rank 0 did not exit after its peer died")
        assert time.monotonic() - t < 8 + 5 + 20
        assert procs[0].returncode != 0
        assert "executor: error:" in err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


STEADY_SCRIPT = r"""
import json, os, sys
import torch
sys.path.insert(0, sys.argv[1])


def heap():
    # the brk heap, in as many mappings as it has (a forked child's growth is a mapping of its own)
    size = 0
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            lo, hi = line.split()[0].split("-")
            size += int(hi, 16) - int(lo, 16)
    return size


def measure(mode, mib):
    got = {}
    if mode == "steady":
        from executor.runtime import steady_malloc
        got["malloc"] = steady_malloc()
    h0 = heap()
    t = torch.ones(mib * 2**18)  # MiB of float32
    h1 = heap()
    del t
    return {**got, "grown": h1 - h0, "kept": heap() - h0}


# each measurement in a child forked right after torch's import: its heap and allocator state
# are those of a process that just imported torch, as a process of its own per measurement
out = {}
for mib in map(int, sys.argv[2:]):
    for mode in ("steady", "default"):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, json.dumps(measure(mode, mib)).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            out[f"{mode} {mib}"] = json.loads(f.read())
        assert os.waitpid(pid, 0)[1] == 0
print(json.dumps(out))
"""
STEADY_MIBS = (24, 160)


@pytest.fixture(scope="module")
def heap_growth():
    """``{"<mode> <MiB>": {"grown", "kept"[, "malloc"]}}``: the heap's growth for one float32
    tensor of MiB, and what it keeps after its free, under either allocator mode."""
    r = subprocess.run([sys.executable, "-c", STEADY_SCRIPT, str(REPO_ROOT), *map(str, STEADY_MIBS)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc/self/maps (Linux)")
@pytest.mark.parametrize("mib", STEADY_MIBS)
def test_steady_malloc_keeps_large_tensors_on_the_heap(heap_growth, mib):
    """glibc by default maps a 24 MiB tensor on its own and unmaps it when freed (the next one
    faults its pages in afresh); under the executor's steady allocator it comes from the heap
    and the heap keeps it after the free (no trimming), for the next iteration to reuse. So
    does a 160 MiB one, above glibc's largest mmap threshold (32 MiB): gpt2-124m's embedding
    gradient is 147 MiB, and only M_MMAP_MAX=0 keeps such a block off its own mapping."""
    got = {mode: heap_growth[f"{mode} {mib}"] for mode in ("steady", "default")}
    assert got["steady"]["malloc"] == "steady (glibc mallopt: M_MMAP_THRESHOLD=33554432, M_TRIM_THRESHOLD=-1, M_MMAP_MAX=0)"
    assert got["steady"]["grown"] >= (mib - 8) * 2**20 and got["steady"]["kept"] == got["steady"]["grown"]
    assert got["default"]["grown"] < 2**20 and got["default"]["kept"] < 2**20


def test_distributed_refuses_an_unknown_malloc_mode():
    from executor.runtime import distributed

    with pytest.raises(InputError, match=r"--malloc: 'fast' is not accepted; expected one of steady, default"):
        with distributed(malloc="fast", environ={}):
            pass
