"""guidellm in a virtual env of its own, cached under ``~/.cache/specload/guidellm-<version>/``.

guidellm pins its own torch, transformers and httpx; in specload's env it would fight
specload's dependencies. pip would pull the CUDA torch (several GB of nvidia wheels) unless a
CPU torch is at hand: when a folder in ``$PIP_FIND_LINKS`` holds a ``torch-*+cpu``
wheel, that one is pinned. The env is built in a temporary directory and renamed into place
only when complete (an interrupted install is never reused); a lock keeps two builders apart.
Run guidellm as ``python -m guidellm``: the env's console scripts point at the temporary path.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.vllm_env import cache_root

__all__ = ["GUIDELLM_VERSION", "GuidellmEnvError", "ensure_guidellm_env"]

#: The guidellm release the peers benchmark was written against (its CLI is ``guidellm run``).
GUIDELLM_VERSION = "0.8.1"

_COMPLETE = ".specload-complete"


class GuidellmEnvError(RuntimeError):
    """The env could not be built; the message carries pip's last lines and the log path."""


def _links() -> list[str]:
    return [p for p in os.environ.get("PIP_FIND_LINKS", "").split() if p]


def _cpu_torch(links: list[str]) -> str | None:
    """``torch==X+cpu`` when a local folder holds a CPU torch wheel for this Python."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for link in links:
        for wheel in sorted(Path(link).glob(f"torch-*+cpu-{tag}-*.whl")):
            m = re.match(r"torch-([^-]+)-", wheel.name)
            if m:
                return f"torch=={m.group(1)}"
    return None


def _pip(cmd: list[str], what: str, log: Path) -> None:
    with open(log, "ab") as fh:
        fh.write(("$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise GuidellmEnvError(f"{what} failed (exit {rc}); log {log}:\n{tail}")


def ensure_guidellm_env(version: str = GUIDELLM_VERSION, root: Path | None = None) -> Path:
    """The python of a cached env with ``guidellm==version``; built on first use (~3 min)."""
    root = root or cache_root()
    final = root / f"guidellm-{version}"
    python = final / "bin" / "python"
    if (final / _COMPLETE).exists():
        return python
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"guidellm-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / _COMPLETE).exists():
            return python
        for stale in root.glob(f".guidellm-{version}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".guidellm-{version}.tmp-", dir=root))
        log = root / f"guidellm-{version}.install.log"
        log.write_text("")
        try:
            _pip([sys.executable, "-m", "venv", str(tmp)], "python -m venv", log)
            links = _links()
            pins = [p for p in [_cpu_torch(links)] if p]
            _pip(
                [
                    str(tmp / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    *[a for link in links for a in ("--find-links", link)],
                    *pins,
                    f"guidellm=={version}",
                ],
                f"pip install guidellm=={version}",
                log,
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        (tmp / _COMPLETE).write_text(version + "\n")
        os.rename(tmp, final)
    return python
