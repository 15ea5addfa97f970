"""Pack a validation's raw runs into one deterministic ``.tar.xz``, and unpack the committed ones.

    python studies/raw_runs.py unpack            # every committed archive (below) into its report folder
    python studies/raw_runs.py unpack reports/cpu-gloo-mlp/validation-raw.tar.xz
    python studies/raw_runs.py pack reports/cpu-gloo-mlp validation          # -> reports/cpu-gloo-mlp/validation-raw.tar.xz
    python studies/raw_runs.py pack reports/zoo/lanes/zoo scenarios 'zoo-*' --name lanes-raw

A validation writes its raw measurements (per-rank step records, the rounds' lockstep traces)
beside its summary files; ``ddpsim validate --reanalyze`` reads them. The committed reports keep
the summaries as files and the raw runs in one archive per validation, unpacked in place by
``unpack`` (or ``tar -xJf ARCHIVE -C FOLDER``): ``reports/<scenario>/validation-raw.tar.xz`` into
its own folder, ``studies/zoo/lanes-raw.tar.xz`` (the per-model reports and raw runs of the
whole-zoo validation ``reports/zoo/lanes``) into ``reports/zoo/lanes/zoo``. ``pack`` makes the archive byte-for-byte
reproducible: members sorted by path, mtime 0, uid/gid 0, no user or group names, mode 0644 for
files and 0755 for folders, xz preset 9 (Python's ``tarfile`` and ``lzma``).
"""

from __future__ import annotations

import argparse
import glob
import io
import lzma
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = ".tar.xz"
# archives kept outside the report folder they unpack into
ELSEWHERE = {"studies/zoo/lanes-raw.tar.xz": "reports/zoo/lanes/zoo"}


def _members(folder: Path, patterns: list[str]) -> list[Path]:
    out: set[Path] = set()
    for pat in patterns:
        for hit in sorted(folder.glob(pat)):
            out.add(hit)
            if hit.is_dir():
                out.update(p for p in hit.rglob("*"))
    if not out:
        raise SystemExit(f"raw_runs: error: patterns {patterns} match nothing under {folder}")
    return sorted(out, key=lambda p: p.relative_to(folder).as_posix())


def _info(path: Path, name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if path.is_dir():
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = path.stat().st_size, 0o644
    return info


def pack(folder: Path, patterns: list[str], name: str) -> Path:
    """Write ``folder/<name>.tar.xz`` holding the paths under ``folder`` that ``patterns`` match."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for p in _members(folder, patterns):
            info = _info(p, p.relative_to(folder).as_posix())
            if info.isdir():
                tar.addfile(info)
            else:
                with p.open("rb") as fh:
                    tar.addfile(info, fh)
    out = folder / f"{name}{SUFFIX}"
    out.write_bytes(lzma.compress(buf.getvalue(), preset=9))
    return out


def target(archive: Path) -> Path:
    """The folder ``archive`` unpacks into: its own, or the report folder :data:`ELSEWHERE` names."""
    try:
        rel = archive.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return archive.parent
    return ROOT / ELSEWHERE[rel] if rel in ELSEWHERE else archive.parent


def unpack(archive: Path, into: Path) -> int:
    """Extract ``archive`` into ``into``; returns the number of members."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, mode="r:xz") as tar:
        members = tar.getmembers()
        tar.extractall(into, filter="data")
    return len(members)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    u = sub.add_parser("unpack", help="extract archives (default: every committed one, into its report folder)")
    u.add_argument("archives", nargs="*", type=Path)
    u.add_argument("--into", type=Path, help="extract here (default: the archive's report folder)")
    p = sub.add_parser("pack", help="pack the paths under FOLDER that PATTERNS match into FOLDER/NAME.tar.xz")
    p.add_argument("folder", type=Path)
    p.add_argument("patterns", nargs="+")
    p.add_argument("--name", default="validation-raw", help="archive name without .tar.xz (default: validation-raw)")
    args = ap.parse_args(argv)
    if args.verb == "pack":
        out = pack(args.folder, args.patterns, args.name)
        print(f"{out}: {out.stat().st_size} bytes")
        return 0
    archives = args.archives or [*sorted(Path(p) for p in glob.glob(str(ROOT / "reports" / "**" / f"*{SUFFIX}"), recursive=True)),
                                 *(ROOT / a for a in ELSEWHERE)]
    for a in archives:
        if not a.is_file():
            print(f"raw_runs: error: archive {a}: no such file", file=sys.stderr)
            return 2
        into = args.into or target(a)
        print(f"{a} -> {into}: {unpack(a, into)} members")
    return 0


if __name__ == "__main__":
    sys.exit(main())
