"""The import: one profile's events -> :class:`~ddpsim.trace.profile.result.ProfileImport`."""

from __future__ import annotations

from pathlib import Path

from ddpsim.trace.profile.result import ProfileImport


def import_profile(path: str | Path, model: str | None = None, *, seed: int = 0) -> ProfileImport:
    """Import one rank's torch.profiler trace.

    Args:
        path: the profile (``.json`` or ``.json.gz``).
        model: a built-in model name or ``package.module:factory`` whose parameters (DDP's
            order) name the profile's gradients; None maps them by the recorded bucket sizes.
        seed: passed to the factory (only its parameter shapes are used).

    Raises:
        InputError: one line naming what the profile lacks (no ProfilerStep, no GPU kernels,
            no backward, not JSON, truncated) or a factory whose parameters do not match the
            recorded bucket sizes.
    """
    raise NotImplementedError("being written")
