"""The dispatcher builds only the verb it is given (``ddpsim.cli.main._verb``): a verb's
``--help`` and errors are the full parser's, and no other verb's module is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddpsim.cli.main import COMMANDS, _verb, build_parser


@pytest.mark.parametrize("argv,expected", [
    (["run", "--out", "x"], ("run",)),
    (["collectives", "--help"], ("collectives",)),
    ([], COMMANDS),
    (["--help"], COMMANDS),
    (["--version"], COMMANDS),
    (["runn"], COMMANDS),          # a misspelt verb: the full parser names the choices
    (["--quiet", "run"], COMMANDS),
])
def test_the_parser_holds_the_verb_given_else_every_verb(argv, expected):
    assert _verb(argv) == expected


@pytest.mark.parametrize("verb", ["run", "sweep", "collectives"])
def test_a_verbs_help_is_the_same_from_the_one_verb_parser(verb):
    def help_of(parser):
        sub = next(a for a in parser._actions if a.dest == "command")
        return sub.choices[verb].format_help()

    assert help_of(build_parser((verb,))) == help_of(build_parser())


def test_run_help_imports_no_other_verbs_module():
    code = ("import sys\nfrom ddpsim.cli.main import main\n"
            "try:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('ddpsim.cli.') and m != 'ddpsim.cli.main'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out.strip().splitlines()[-1])
    assert "ddpsim.cli.run" in loaded
    assert not {f"ddpsim.cli.{v}" for v in COMMANDS if v != "run"} & set(loaded)
