"""Does hostile input break ddpsim's error contract? One command, prints per target:

    python benchmarks/fuzz_inputs.py [--examples N] [--seed S] [--timeout-s T] [--targets a,b] [--shrink]

Feeds N inputs in all (default 10,000, split evenly) from tests/fuzz_strategies.py (the strategies
the test suite samples a few of) to the loaders (scenario, trace, plan, calibration, topology,
method-error, catalogue, and a torch.profiler trace read as ``trace --from-profile`` and
``compare`` read it), the scenario schema (``scenario_from_dict``) and the CLI (``main(argv)``
in-process, in a temporary folder). The inputs are drawn by hypothesis itself (``@given`` with
``max_examples`` per target, the generate phase only, seeded by ``--seed``): the test never fails,
it records every outcome, so nothing is shrunk and every input counts. Per target it prints the
inputs tried, the InputErrors, every other outcome by kind and type (an escaped exception, a hang
past ``--timeout-s``, an InputError of several lines or over 1,000 characters, a CLI exit status
other than 0 and 2) with the first input that produced it, the longest InputError message, and the
wall time. ``--shrink`` then asks hypothesis (``find``) for a minimal input of each escaped
exception type (not of hangs, whose every shrink step costs a timeout). Exit status 1 when anything
broke the contract.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import NoSuchExample, Unsatisfiable

# the strategies live beside the tests that run a small sample of them
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fuzz_strategies as fz  # noqa: E402 (found through the path above)

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
          HealthCheck.filter_too_much]


class Tally:
    """What one target's inputs gave."""

    def __init__(self) -> None:
        self.tried = 0
        self.kinds: collections.Counter = collections.Counter()
        self.failures: dict[tuple[str, str], list] = {}  # (kind, type) -> [count, first Outcome, recipe]
        self.longest = ""
        self.wall_s = 0.0

    def add(self, outcome: fz.Outcome, recipe: str) -> None:
        self.tried += 1
        self.kinds[outcome.kind] += 1
        if outcome.kind == "input_error" and len(outcome.message) > len(self.longest):
            self.longest = outcome.message
        if outcome.kind not in fz.GOOD:
            entry = self.failures.setdefault((outcome.kind, outcome.error), [0, outcome, recipe])
            entry[0] += 1


def fuzz(target: str, examples: int, seed: int, timeout_s: float) -> Tally:
    tally = Tally()

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=HEALTH)
    @given(fz.inputs(target))
    def one(case) -> None:
        # NOTE: a hang inside C code that SIGALRM cannot interrupt prints every thread's stack
        faulthandler.dump_traceback_later(6 * timeout_s)
        try:
            tally.add(fz.run_case(target, case, timeout_s), fz.recipe(target, case))
        finally:
            faulthandler.cancel_dump_traceback_later()

    t0 = time.perf_counter()
    one()
    tally.wall_s = time.perf_counter() - t0
    return tally


def shrink(target: str, kind: str, error: str, timeout_s: float, seed: int) -> str | None:
    """The recipe of a minimal input of ``target`` whose outcome is (``kind``, ``error``)."""
    from hypothesis import find

    def same(case) -> bool:
        o = fz.run_case(target, case, timeout_s)
        return (o.kind, o.error) == (kind, error)

    try:
        case = find(fz.inputs(target), same, settings=settings(max_examples=300, deadline=None, database=None,
                                                                 suppress_health_check=HEALTH),
                    random=__import__("random").Random(seed))
    except (NoSuchExample, Unsatisfiable):
        return None
    return fz.recipe(target, case)


def report(target: str, t: Tally) -> None:
    bad = sum(n for (_, _), (n, _, _) in t.failures.items())
    print(f"\n[{target}] {t.tried} inputs in {t.wall_s:.1f} s ({t.wall_s / max(1, t.tried) * 1e3:.1f} ms each): "
          f"{t.kinds['input_error']} InputError, {t.kinds['ok']} accepted, {bad} broke the contract")
    if t.longest:
        print(f"    longest InputError: {len(t.longest)} characters: {t.longest[:160]!r}")
    for (kind, error), (n, outcome, recipe) in sorted(t.failures.items(), key=lambda kv: -kv[1][0]):
        print(f"    {n:5d} x {kind} {error}: {outcome.message[:200]!r}")
        print(f"            first input: {recipe[:400]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=10_000, help="inputs over all targets together (default 10,000)")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    ap.add_argument("--timeout-s", type=float, default=10.0, help="seconds per input before it counts as a hang (default 10)")
    ap.add_argument("--targets", default=",".join(fz.TARGETS), help=f"comma list of {', '.join(fz.TARGETS)}")
    ap.add_argument("--shrink", action="store_true", help="find a minimal input of each escaped exception type")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in targets if t not in fz.TARGETS]
    if unknown:
        ap.error(f"--targets: unknown {unknown}; expected some of {', '.join(fz.TARGETS)}")
    per = max(1, args.examples // len(targets))
    fz.warm_up()
    print(f"fuzzing {', '.join(targets)}: {per} inputs each, seed {args.seed}, {args.timeout_s:g} s per input")
    tallies = {}
    for target in targets:
        tallies[target] = fuzz(target, per, args.seed, args.timeout_s)
        report(target, tallies[target])
    broken = {t: tl for t, tl in tallies.items() if tl.failures}
    if args.shrink:
        print("\nminimal inputs (hypothesis find, 300 examples each):")
        for target, tl in broken.items():
            for kind, error in tl.failures:
                if kind != "hang":
                    found = shrink(target, kind, error, args.timeout_s, args.seed)
                    print(f"    [{target}] {kind} {error}: {found or 'not met again in 300 examples'}")
    total = sum(tl.tried for tl in tallies.values())
    escapes = sum(n for tl in tallies.values() for n, _, _ in tl.failures.values())
    print(f"\n{total} inputs, {escapes} broke the contract, in {', '.join(broken) or 'no target'}; "
          f"{sum(tl.wall_s for tl in tallies.values()):.0f} s")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
