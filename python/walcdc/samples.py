"""A small real CUBRID log shipped with the package, for trying walcdc out.

``breadth`` is the active log volume of a CUBRID 11.4 database (ko_KR.utf8, 4 KiB pages) that ran
a workload of DDL and DML over many column types. It is stored xz-compressed and unpacked on
first use into a cache directory (``$WALCDC_CACHE``, else ``~/.cache/walcdc``).
"""

from __future__ import annotations

import lzma
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["sample_path", "cache_dir"]

_SAMPLES = {"breadth": ["breadth_lgat"]}


def cache_dir() -> Path:
    base = os.environ.get("WALCDC_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "walcdc"


def sample_path(name: str = "breadth") -> Path:
    """The directory holding the sample log set ``name``, unpacked if needed."""
    if name not in _SAMPLES:
        raise ValueError(f"unknown sample {name!r}; available: {sorted(_SAMPLES)}")
    target = cache_dir() / "samples" / name
    target.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).parent / "samples"
    for vol in _SAMPLES[name]:
        out = target / vol
        if out.exists():
            continue
        # Unpack next to the target and rename, so a half-written volume is never seen.
        with (
            lzma.open(here / f"{vol}.xz") as src,
            tempfile.NamedTemporaryFile(dir=target, delete=False) as tmp,
        ):
            shutil.copyfileobj(src, tmp, 1 << 20)
        os.replace(tmp.name, out)
    return target
