"""The repository stands alone: no tracked file names a folder beside the checkout, a path
of the machine it was developed on, or the development lab's own tooling (a user's clone has
none of them). The GPU kit, the calibration data and the docs it needs are in the repo."""

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
            r"\bshared/" + "gpu",
            r"(?<![\w.-])/" + "work/",
            r"(?<![\w.-])/" + r"tmp/\w",
            r"(?<![\w.-])/" + r"root/(?!\.cache/)",
            r"(?<![\w.-])/" + r"opt/wheels",
        ]
    )
)
#: The lab's own tooling: its GPU kit's scripts, its tool library, its issue and review
#: tools. Raw result logs record what ran where and may name them; nothing else may.
LAB_TOOLING = re.compile(
    "|".join(
        [
            r"\b(serve|stop|run)_" + r"vllm(_bench)?\.sh\b",
            r"\bbuild-" + r"vllm-bundle\.sh\b",
            r"\bbench" + r"tool\.py\b",
            r"\.lib" + r"rary/",
            r"\bissues (show|resolved|note|blocked) ",
            r"\bduplicates " + "--change",
        ]
    )
)
#: A ticket of the lab's tracker instead of the feature's name, also across a line break.
TICKET = re.compile(r"\b[Ii]ssues?\s+" + r"#?[0-9]+\b")


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
        raw_log = name.startswith(b"benchmarks/results/") and name.endswith(b".log")
        if b"\0" in data[:8192]:
            continue  # binary (images, archives)
        text = data.decode("utf-8", "replace")
        if not raw_log:
            hits += [
                f"{name.decode()}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
                for m in TICKET.finditer(text)
            ]
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or (not raw_log and LAB_TOOLING.search(line)):
                hits.append(f"{name.decode()}:{n}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits[:20])
