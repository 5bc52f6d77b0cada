"""The repository stands alone: no tracked file names a folder beside the checkout or a path
of the machine it was developed on (a user's clone has neither)."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO

#: A "shared" folder beside the checkout, absolute paths of the development machine, and
#: scratch paths of the machine a recorded run came from (a temporary folder, an output
#: folder under root's home; vLLM's own cache folder under a home is vLLM's, not ours).
#: The patterns are assembled so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            r"(?<![\w.-])/" + "work/",
            r"(?<![\w.-])/" + r"tmp/\w",
            r"(?<![\w.-])/" + r"root/(?!\.cache/)",
        ]
    )
)


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    hits = []
    for name in filter(None, files):
        path = REPO / name.decode()
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (images, archives)
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{name.decode()}:{n}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits[:20])
