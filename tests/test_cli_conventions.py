"""The CLI's conventions (ddpsim/cli/): typed flags with bounds, argparse's own errors in the one-line
format with exit 2, no deprecated spelling, hidden flag or alias, scenario dicts from flags in the
scenario's key names, logging instead of prints, tqdm's bar off a terminal, figures outside pyplot,
and the verbs that run without PyTorch."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from ddpsim.cli.main import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
MLP = str(ROOT / "traces" / "mlp.cpu.json")
HUGE = "9" * 100_000


def fails(capsys, argv):
    """``main(argv)``'s stderr, after checking it is one ``ddpsim: error:`` line, exit 2, no stdout."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (rc, out, err)
    assert err.startswith("ddpsim: error: ") and err.count("\n") == 1, err
    return err[len("ddpsim: error: "):].rstrip("\n")


@pytest.mark.parametrize("argv,line", [
    (["simulate", "--trace", MLP, "--topology", "cpu-gloo", "--set", "cluster.nodes=x"],
     "--set cluster.nodes: 'x' is not accepted; expected an integer >= 1 and <= 4096"),
    (["collectives", "--topology", "dgx-a100", "--nodes", "0"], "--nodes: 0 is not accepted; expected an integer in [1, 4096]"),
    (["topology", "dgx-a100", "--nodes", "-3"], "--nodes: -3 is not accepted; expected an integer in [1, 4096]"),
    (["sweep", "--trace", MLP, "--set", "cluster.nodes=1.5"],
     "--set cluster.nodes: 1.5 is not accepted; expected an integer >= 1 and <= 4096"),
    (["sweep", "--trace", MLP, "--jobs", "0"], "--jobs: 0 is not accepted; expected an integer in [1, 1024]"),
    (["run", "--jobs", "99999999999999999999999"],
     "--jobs: '99999999999999999999999' is not accepted; expected an integer in [1, 1024]"),
    (["simulate", "--trace", MLP, "--set", "cluster.latency_us=nan", "--set", "cluster.bandwidth_gbps=1"],
     "--set cluster.latency_us: 'nan' is not accepted; expected a number of microseconds >= 0 and <= 1e+09 or null"),
    (["simulate", "--trace", MLP, "--set", "cluster.latency_us=1", "--set", "cluster.bandwidth_gbps=inf"],
     "--set cluster.bandwidth_gbps: 'inf' is not accepted; expected a number of GB/s > 0 and <= 1e+09 or null"),
    (["simulate", "--trace", MLP, "--format", "xml"],
     "--format: 'xml' is not accepted; expected one of table, json, csv"),
    (["simulate", "--trace", MLP, "--topology", "cpu-gloo", "--set", "ddp.comm_hook=zip"],
     "--set ddp.comm_hook: 'zip' is not accepted; expected one of none, allreduce, fp16, bf16, powersgd"),
    (["simulate", "--trace", MLP, "--topology", "cpu-gloo", "--set", "ddp.forward_sync_buffers=maybe"],
     "--set ddp.forward_sync_buffers: 'maybe' is not accepted; expected true or false or null"),
    (["simulate", "--trace", MLP, "--comm-hook", "fp16"],
     "arguments: '--comm-hook fp16' is not accepted; expected the flags and arguments 'ddpsim COMMAND --help' lists"),
    (["collectives", "--topology", "dgx-a100", "--algorithm", "butterfly"],
     "--algorithm: 'butterfly' is not accepted; expected one of ring, tree, nvls, hierarchical"),
    (["collectives", "--topology", "dgx-a100", "--protocol", "LL256"],
     "--protocol: 'll256' is not accepted; expected one of ll, ll128, simple"),
    (["collectives", "--topology", "dgx-a100", "--sizes", "1KiB,,1MiB"],
     "--sizes: '1KiB,,1MiB' is not accepted; expected a comma list of sizes in (0, 1 TiB] like 1KiB,1MiB"),
    (["collectives", "--topology", "dgx-a100", "--sizes", "1e309"],
     "--sizes: '1e309' is not accepted; expected a comma list of sizes in (0, 1 TiB] like 1KiB,1MiB"),
    (["trace", "--model", "mlp", "--device", "tpu"], "--device: 'tpu' is not accepted; expected one of cpu, cuda"),
    (["trace", "--model", "mlp", "--iterations", "0"], "--iterations: 0 is not accepted; expected an integer in [1, 10000]"),
    (["retime", MLP, "--gpu", "tpu", "--out", "x.json"], "--gpu: 'tpu' is not accepted; expected one of a100, a100-40gb, "
     "a100-pcie, b200, gb200, gh200, h100, h100-pcie, h200, l40s, mi250x, mi300x, mi325x, mi355x, v100 (the GPUs of the "
     "hardware catalogue)"),
    (["retime", MLP, "--gpu", "h100", "--out", "x.json", "--set", "compute_efficiency=1.5"],
     "--set compute_efficiency: 1.5 is not accepted; expected a number in (0, 1]"),
    (["trace", "--model", "mlp", "--set", "seq_len=x", "--out", "x.json"],
     "--set seq_len: 'x' is not accepted; expected an integer in [1, 1048576]"),
    (["trace", "--model", "mlp", "--set", "autocast=fp8", "--out", "x.json"],
     "--set autocast: 'fp8' is not accepted; expected one of bf16, fp16, none"),
    (["trace", "--model", "mlp", "--set", "seq-len=8", "--out", "x.json"],
     "--set: 'seq-len=8' is not accepted; expected KEY=VALUE with KEY one of dtype, autocast, optimizer, seq_len, "
     "n_layer, input_shape, input_dtype"),
    (["retime", MLP, "--gpu", "h100", "--out", "x.json", "--set", "channels_last=yes"],
     "--set channels_last: 'yes' is not accepted; expected true or false"),
    (["validate", "--launch", "batch"], "--launch: 'batch' is not accepted; expected one of round, point"),
    (["validate", "zoo", "--launch", "round"], "--launch: 'round' is not accepted with SCENARIO 'zoo'; expected it only "
     "with a scenario (the zoo runs each model its own way and writes its own method_error.json)"),
    (["validate", "zoo:tied_lm", "--no-plots"], "--no-plots: True is not accepted with SCENARIO 'zoo:tied_lm'; expected "
     "it only with a scenario (the zoo runs each model its own way and writes its own method_error.json)"),
    (["validate", "zoo:,"], "SCENARIO: 'zoo:,' is not accepted; expected zoo or zoo:NAME,NAME,... (names from 'ddpsim "
     "trace --list-models')"),
    (["validate", "--timeout-s", "-1"], "--timeout-s: '-1' is not accepted; expected a finite number > 0 and <= 604800"),
    (["plan", MLP, "--options", '{"semantics": "old"}'], "--options: semantics: 'old' is not accepted; expected 'modern' or 'legacy'"),
    (["plan", MLP, "--options"], "--options: no value given; expected one value"),
    (["simulate", "--topology", "cpu-gloo"], "--trace: missing; expected a value (required)"),
    (["frobnicate"], "COMMAND: 'frobnicate' is not accepted; expected one of " + ", ".join(COMMANDS)),
])
def test_bad_flag_values_give_one_line_and_exit_2(capsys, argv, line):
    assert fails(capsys, argv) == line


def test_defects_refused_with_one_line(capsys, tmp_path):
    # a folder as --out: one line, not IsADirectoryError
    assert fails(capsys, ["plan", MLP, "--out", str(tmp_path)]) == \
        f"--out: {str(tmp_path)!r} is not accepted; expected a file path, not a folder"
    # a name the system cannot look up: one line with its reason, not OSError
    assert fails(capsys, ["plan", MLP, "--out", "x" * 300]).endswith(
        "(302 characters) is not accepted; expected a file path (File name too long)")
    assert fails(capsys, ["plan", MLP, "--options", '{"bucket_cap_mb_list": [1, null, 5]}']).startswith(
        "--options: bucket_cap_mb_list: ")
    # a log range of a billion points: refused with the scenario's bound, before any list is built
    assert fails(capsys, ["sweep", "--trace", MLP, "--set", "sweep.bucket_cap_mb={min: 1, max: 200, points: 1e9}"]) == \
        "--set sweep.bucket_cap_mb.points: '1e9' is not accepted; expected an integer >= 1 and <= 10000"
    # a cap the scenario refuses: named by its key
    assert fails(capsys, ["sweep", "--trace", MLP, "--set", "sweep.bucket_cap_mb=[1, 2000000]"]).startswith(
        "--set sweep.bucket_cap_mb[1]: 2000000 is not accepted; expected a number > 0")
    assert fails(capsys, ["sweep", "--trace", MLP, "--set", "sweep.bucket_cap_mb={min: 200, max: 1, points: 5}"]) == \
        "--set sweep.bucket_cap_mb.max: 1 is not accepted; expected a number >= min (200)"


def test_broadcast_refuses_an_algorithm_the_model_does_not_have(capsys):
    assert fails(capsys, ["collectives", "--topology", "dgx-a100", "--collective", "broadcast", "--algorithm", "nvls"]) == \
        "--algorithm: 'nvls' is not accepted with --collective broadcast; expected none (NCCL broadcasts with its one algorithm)"
    assert "with --collective broadcast" in fails(
        capsys, ["collectives", "--topology", "cpu-gloo", "--collective", "broadcast", "--algorithm", "ring"])
    assert main(["collectives", "--topology", "dgx-a100", "--collective", "broadcast", "--sizes", "1MiB", "--format", "csv"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split(",")
    assert row[0] == "1048576" and row[4] == "ring"


@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", MLP, "--set", f"world_size={HUGE}"],
    ["sweep", "--trace", MLP, "--set", f"sweep.bucket_cap_mb=[{HUGE}]"],
    ["collectives", "--topology", "dgx-a100", "--sizes", HUGE + "KiB"],
    ["topology", "dgx-a100", "--set", "x" * 100_000],
    ["frobnicate" * 10_000],
    ["run", "default", "x" * 100_000],
    ["validate", "--reanalyze", "--out-dir", "x" * 300],
])
def test_error_lines_cut_a_huge_value(capsys, argv):
    line = fails(capsys, argv)
    assert len(line) < 400 and "characters)" in line


@pytest.mark.parametrize("argv, flag", [(["trace", "--model", "mlp", "--iters", "7"], "--iters"),
                                        (["trace", "--retime-for", "H100", "--out", "x.json"], "--retime-for"),
                                        (["validate", "--zoo"], "--zoo")])
def test_no_deprecated_spelling_is_kept(capsys, argv, flag):
    assert fails(capsys, argv).startswith(f"arguments: '{flag}")


def test_no_hidden_flag_alias_or_second_spelling():
    sub = build_parser()._subparsers._group_actions[0]
    assert tuple(sub.choices) == COMMANDS  # no alias of a verb
    assert [a.dest for a in sub._choices_actions] == list(COMMANDS)  # every verb listed
    for verb, parser in sub.choices.items():
        for action in parser._actions:
            assert action.help != argparse.SUPPRESS, (verb, action.option_strings)
            assert len([o for o in action.option_strings if o.startswith("--")]) <= 1, (verb, action.option_strings)


#: every verb's long flags: the command line is frozen (a new knob is a scenario key set with
#: --set, or a --set key of trace/retime); adding a flag means editing this on purpose
FLAGS = {
    "run": "--out-dir --jobs --set --no-plots --quiet --method-error",
    "sweep": "--trace --topology --set --jobs --out-dir --format --quiet",
    "simulate": "--trace --topology --set --format",
    "plan": "--options --plan --format --out",
    "collectives": "--topology --nodes --set --ranks --sizes --calibration --algorithm --protocol --collective --format "
                   "--catalogue",
    "topology": "--list --catalogue --nodes --set --draw --format",
    "trace": "--list-models --model --device --batch-size --iterations --warmup --out --from-profile --num-threads --set "
             "--seed --no-hook-overhead --compiled-graph --graph-into --derive-depth-from",
    "retime": "--gpu --out --batch-size --set --catalogue",
    "validate": "--calibration --caps --repeats --iterations --warmup --out-dir --timeout-s --quiet --reanalyze "
                "--num-threads --no-bucket-timing --scenario-trace --launch --method-error --no-plots",
    "compare": "--model --scenario --name --out-dir --no-plots",
    "explore": "--out-dir --jobs --set --no-plots --quiet --ray --cluster",
}


def test_the_flag_set_is_frozen():
    sub = build_parser()._subparsers._group_actions[0]
    flags = {verb: [o for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
             for verb, p in sub.choices.items()}
    assert {verb: " ".join(f) for verb, f in flags.items()} == FLAGS
    assert sum(len(f) for f in flags.values()) <= 100


@pytest.mark.parametrize("verb", COMMANDS)
def test_every_verb_leads_with_its_question_and_shows_two_examples(verb):
    sub = build_parser()._subparsers._group_actions[0].choices[verb]
    assert sub.description.splitlines()[0].endswith("?")
    assert isinstance(sub.formatter_class, type) and issubclass(sub.formatter_class, argparse.RawDescriptionHelpFormatter)
    examples = [ln for ln in sub.epilog.splitlines() if ln.startswith(f"  ddpsim {verb} ")]
    assert len(examples) == 2, sub.epilog


def test_trace_set_keys_reach_the_capture_and_its_recorded_command():
    from ddpsim.cli import trace

    args = build_parser().parse_args(["trace", "--model", "gpt2-124m", "--batch-size", "2", "--set", "seq_len=64",
                                      "--set", "input_shape=3,8", "--set", "autocast=BF16", "--set", "seq_len=32",
                                      "--out", "t.json"])
    trace.apply_model_set(args)
    assert (args.seq_len, args.input_shape, args.autocast, args.n_layer, args.dtype) == (32, (3, 8), "bf16", None, None)
    assert trace._model_kwargs(args) == {"seq_len": 32}
    assert trace._command(args).endswith("--seed 0 --set autocast=bf16 --set seq_len=32 --set input_shape=3,8")


def test_retime_set_splits_the_workload_from_the_roofline():
    from ddpsim.cli import retime

    args = build_parser().parse_args(["retime", MLP, "--gpu", "h100", "--out", "x.json", "--set", "seq_len=128",
                                      "--set", "channels_last=true", "--set", "min_kernel_s=5e-6"])
    workload, assumptions = retime.parse_set(args)
    assert workload == {"seq_len": 128, "channels_last": True} and assumptions.min_kernel_s == 5e-6


def test_flags_build_the_scenario_keys_of_the_scenario_file(monkeypatch):
    import ddpsim.pipeline.scenario as scenario_module
    from ddpsim import api
    from ddpsim.cli.run import command_scenario

    class Seen(Exception):
        pass

    def seen(data, source):
        raise Seen(data)

    monkeypatch.setattr(scenario_module, "scenario_from_dict", seen)
    p = build_parser()
    with pytest.raises(Seen) as e:
        command_scenario(p.parse_args(["sweep", "--trace", MLP, "--set", "ddp.comm_hook=fp16", "--set",
                                       "simulation.iterations=3", "--set", "sweep.bucket_cap_mb=[null, 5]"]), "ddpsim sweep")
    data = e.value.args[0]
    assert "comm_hook" not in data and data["ddp"] == {"comm_hook": "fp16"}
    assert data["simulation"] == {"iterations": 3} and data["sweep"]["bucket_cap_mb"] == [None, 5]
    assert data["cluster"] == {"topology": "cpu-gloo", "nodes": 1}
    with pytest.raises(Seen) as e:
        command_scenario(p.parse_args(["simulate", "--trace", MLP, "--topology", "cpu-gloo", "--set", "world_size=2",
                                       "--set", "ddp.comm_hook=bf16", "--set", "ddp.forward_sync_buffers=true"]),
                         "ddpsim simulate")
    data = e.value.args[0]
    assert "comm_hook" not in data and data["ddp"]["comm_hook"] == "bf16" and data["ddp"]["forward_sync_buffers"] is True
    assert data["world_size"] == 2 and data["cluster"]["topology"] == "cpu-gloo"
    monkeypatch.setattr(api, "scenario_from_dict", lambda d, source: d)
    d = api.adhoc_scenario(trace=MLP, comm_hook="powersgd", ddp={"powersgd": {"matrix_approximation_rank": 2}})
    assert "comm_hook" not in d and d["ddp"] == {"comm_hook": "powersgd", "powersgd": {"matrix_approximation_rank": 2}}


def test_logging_is_configured_once_per_call_and_quiet_raises_the_level(tmp_path, capsys):
    logger = logging.getLogger("ddpsim")
    before = (list(logger.handlers), logger.level)
    argv = ["run", "cpu-gloo-mlp", "--out-dir", str(tmp_path), "--no-plots", "--jobs", "1"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "report: " in out and "wrote timelines for" in err and "\r" not in err  # progress lines, no bar off a terminal
    assert main([*argv, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "report: " in out and err == ""
    assert (list(logger.handlers), logger.level) == before  # main() leaves the logger as it found it


def test_progress_bar_only_on_a_terminal(monkeypatch):
    from ddpsim.pipeline.sweep import progress_bar

    assert progress_bar(3, "x", True).disable  # pytest's stderr is not a terminal: no carriage returns in logs
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert not progress_bar(3, "x", True).disable
    assert progress_bar(3, "x", False).disable  # --quiet / progress=False


def test_figures_never_switch_pyplot_backend(monkeypatch, tmp_path):
    import matplotlib
    import pandas as pd

    from ddpsim.report import plots

    monkeypatch.setattr(matplotlib, "use", lambda *a, **k: pytest.fail("matplotlib.use called"))
    row = {"point": "cap=1", "iteration_p50_s": 0.1, "iteration_p95_s": 0.12, "forward_s": 0.02, "backward_compute_s": 0.05,
           "exposed_comm_s": 0.01, "optimizer_s": 0.01, "other_s": 0.0}
    fig = plots.sweep_figure(pd.DataFrame([row, {**row, "point": "cap=5", "iteration_p50_s": 0.09}]))
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    assert isinstance(fig.canvas, FigureCanvasAgg)
    out = plots.save_figure(fig, tmp_path / "s.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()


def _notorch(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``ddpsim argv`` in a subprocess where ``import torch`` fails (a ``sys.meta_path`` finder)."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith(('torch.', 'torchvision')):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from ddpsim.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_torch_verbs_say_they_need_pytorch_in_one_line(tmp_path):
    for argv in (["trace", "--model", "mlp", "--batch-size", "2", "--out", str(tmp_path / "t.json")],
                 ["retime", MLP, "--gpu", "h100", "--out", str(tmp_path / "r.json")],
                 ["validate", "default"], ["validate", "zoo:tied_lm"]):
        r = _notorch(*argv)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert r.stderr.startswith(f"ddpsim: error: {argv[0]} needs PyTorch: pip install \"ddpsim[capture]\" "
                                   "(or torch itself); import torch failed: No module named 'torch'")
        assert r.stderr.count("\n") == 1


def test_simulating_verbs_run_without_pytorch(tmp_path):
    r = _notorch("run", "scenarios/resnet50-a100-2n.yaml", "--out-dir", str(tmp_path), "--no-plots", "--quiet", "--jobs", "1")
    assert r.returncode == 0 and "report: " in r.stdout, r.stderr
    r = _notorch("sweep", "--trace", MLP, "--set", "sweep.bucket_cap_mb=[1, 5]", "--set", "simulation.iterations=3", "--jobs", "1",
                 "--quiet")
    assert r.returncode == 0 and "world size 2" in r.stdout and r.stderr == "", r.stderr
    for argv in (["plan", MLP], ["topology", "dgx-a100"], ["collectives", "--topology", "cpu-gloo", "--sizes", "1MiB"]):
        r = _notorch(*argv)
        assert r.returncode == 0 and r.stdout, (argv, r.stderr)
