"""SIGKILL `zdebias filter` while its worker processes run (the sharded way, the writer way,
and one process with a pool of feature and output workers): none of them is alive 2 s later
(zdebias.data.process.end_with_parent)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zdebias

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="forked workers: not Windows")

#: the source tree of the zdebias under test
SRC = Path(zdebias.__file__).resolve().parents[1]
#: the ``zdebias`` entry point, as the shell runs it
MAIN = "import sys; from zdebias.cli import main; main(sys.argv[1:])"
NOUNS = "man woman dog cat child girl boy player singer cook".split()
VERBS = "sleeps runs sits eats plays sings walks reads waits smiles".split()
#: seconds after the first worker appears at which the parent is killed
KILL_AFTER = (0.0, 0.7)


def _rows(n: int) -> list[dict[str, str]]:
    """``n`` NLI rows with a planted artifact ("nobody" in contradictions), about 100 bytes each."""
    labels = ("entailment", "neutral", "contradiction")
    out = []
    for i in range(n):
        label = labels[i % 3]
        noun, verb = NOUNS[i % 10], VERBS[(i // 10) % 10]
        words = f"the {noun} {verb} near the {NOUNS[(i // 100) % 10]} {i % 97}"
        out.append(
            {
                "id": f"r{i}",
                "premise": f"A {noun} {verb} in the park number {i % 89}.",
                "hypothesis": ("nobody " if label == "contradiction" and i % 4 else "") + words,
                "label": label,
            }
        )
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A JSONL file of about 3 MB (the writer way: 2 MB or more) and a CSV of three times as
    many rows (never sharded: one process, whose feature pool must outlast the longest
    kill delay)."""
    folder = tmp_path_factory.mktemp("killed")
    rows = _rows(90_000)
    jsonl = folder / "train.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[:30_000]), encoding="utf-8")
    table = folder / "train.csv"
    with table.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return {"jsonl": jsonl, "csv": table}


def _kill_once(args: list[str], delay: float, tmp_path: Path) -> float | None:
    """Start ``zdebias filter ARGS``, SIGKILL it ``delay`` s after its first child process
    appears (at a moment when one runs), and assert that every child it had is gone 2 s
    later. Returns None after the check, or, when the filter ended before ``delay`` had
    passed, how long its children were seen (nothing was checked)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = tmp_path / f"out-{delay:.3f}"
    proc = subprocess.Popen(
        [sys.executable, "-c", MAIN, "filter", *args, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    parent = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {}
    first = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                children = parent.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            for child in children:
                seen.setdefault(child.pid, child)
            if children and first is None:
                first = time.monotonic()
            if children and first is not None and time.monotonic() - first >= delay:
                break  # killed while workers run
            time.sleep(0.02)
        if proc.poll() is not None:
            assert first is not None, "the filter ended before any worker appeared"
            return time.monotonic() - first
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _, alive = psutil.wait_procs(list(seen.values()), timeout=2.0)
        assert [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
        return None
    finally:
        for child in seen.values():  # on failure: leave nothing behind
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _kill_and_check(args: list[str], delay: float, tmp_path: Path) -> None:
    """Kill ``zdebias filter ARGS`` ``delay`` s into its workers' life and check that none
    survives. On a machine fast enough to finish the work within ``delay``, kill it instead
    halfway through the time its workers were seen (a later phase all the same), up to three
    tries; the check itself never loosens."""
    for _ in range(3):
        lived = _kill_once(args, delay, tmp_path)
        if lived is None:
            return
        delay = lived / 2
    pytest.fail(f"the filter ended before it was killed three times (last try at {delay:.2f} s)")


@pytest.mark.parametrize("delay", KILL_AFTER)
@pytest.mark.parametrize(
    ("way", "options"),
    [
        ("sharded", ["jsonl", "--num-proc", "2"]),
        ("writer", ["jsonl"]),
        ("one", ["csv", "--num-proc", "2"]),
    ],
)
def test_no_worker_outlives_a_killed_filter(
    inputs: dict[str, Path], tmp_path: Path, way: str, options: list[str], delay: float
) -> None:
    if way == "writer" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the writer way needs two cores")
    path, *rest = options
    _kill_and_check([str(inputs[path]), *rest], delay, tmp_path)
