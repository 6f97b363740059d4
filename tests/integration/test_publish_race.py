"""Issue 27 item 8: two ``zdebias filter`` with the same new ``--out`` at the same moment.

Exactly one publishes; the other exits 2 with one line (the output is being written, or it
exists now), never a traceback, and never replaces the result published meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zdebias.data.locks import lock_path, output_lock
from zdebias.errors import ConfigError

LABELS = ("entailment", "neutral", "contradiction")
TRIALS = 12


def _data(path: Path, n: int = 60) -> Path:
    rows = [
        {"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i % 7}", "label": LABELS[i % 3]}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def test_two_filters_on_one_new_out_publish_once(tmp_path: Path) -> None:
    data = _data(tmp_path / "d.jsonl")
    command = [sys.executable, "-m", "zdebias.cli", "-q", "filter", str(data), "--biased-k", "2"]
    outcomes = []
    for trial in range(TRIALS):
        out = tmp_path / f"out{trial}"
        procs = [
            subprocess.Popen(
                [*command, "--out", str(out), "--seed", str(seed)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for seed in (1, 2)
        ]
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], (trial, results)
        winner = next(i for i, (code, _, _) in enumerate(results) if code == 0)
        err = results[1 - winner][2]
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert err.startswith(f"error: {out} ") and (
            "is being written by another zdebias process (pid " in err
            or "exists and is not empty; pass --overwrite" in err
        ), err
        summary = json.loads((out / "summary.json").read_text())
        seed = summary.get("shuffle_seed", summary.get("seed"))
        assert seed == winner + 1  # the winner's result, not replaced
        outcomes.append("locked" if "being written" in err else "exists")
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert len(outcomes) == TRIALS


def test_the_lock_names_its_holder_and_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from zdebias.data.locks import output_lock\n"
            f"with output_lock({str(out)!r}):\n"
            "    print('held', flush=True)\n"
            "    sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ConfigError) as info, output_lock(out):
            pass
        assert str(info.value) == (
            f"{out} is being written by another zdebias process (pid {holder.pid})"
        )
    finally:
        holder.communicate("", timeout=30)
    assert not lock_path(out).exists()
    with output_lock(out), output_lock(out):  # free again, and re-entrant
        assert lock_path(out).is_file()
    assert not lock_path(out).exists()


@pytest.mark.parametrize(
    ("args", "name"),
    [(["convert", "{data}", "{out}"], "o.csv"), (["stats", "{data}", "--out", "{out}"], "s.json")],
    ids=["convert", "stats"],
)
def test_a_single_output_file_has_one_writer(tmp_path: Path, args: list[str], name: str) -> None:
    """A command writing one file holds its lock from the output check to its end: another
    process holding it makes the command exit 2 at once, with nothing written."""
    data, out = _data(tmp_path / "d.jsonl"), tmp_path / name
    run = [sys.executable, "-m", "zdebias.cli", "-q", *(a.format(data=data, out=out) for a in args)]
    with output_lock(out):
        proc = subprocess.run(run, capture_output=True, text=True, env=_env())
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{out} is being written by another zdebias process (pid {os.getpid()})" in proc.stderr
    assert not out.exists()
    proc = subprocess.run(run, capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and not lock_path(out).exists()
