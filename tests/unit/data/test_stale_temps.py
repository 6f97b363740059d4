"""Temporary files of a killed writer are removed by the next writer into that folder; those of
a live process or of another host are left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from zdebias.data import writers
from zdebias.data.writers import remove_stale_temps, work_dir_for

GOOD = {"premise": "A man sleeps.", "hypothesis": "A person rests.", "label": "entailment"}

HANG = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from zdebias.data.writers import atomic_open, work_dir_for
    out = Path(sys.argv[1])
    work_dir_for(out / "model")
    with atomic_open(out / "big.jsonl") as fh:
        fh.write("half a line")
        fh.flush()
        (out / "ready").write_text("x")
        time.sleep(120)
    """
)


def test_a_killed_writers_temp_files_go_with_the_next_write(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", HANG, str(out)])
    deadline = time.time() + 60
    while not (out / "ready").exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (out / "ready").unlink()
    left = sorted(p.name for p in out.iterdir())
    assert len(left) == 2 and all(f"-{proc.pid}-" in name for name in left)
    assert {name.split(".tmp-")[0] for name in left} == {".big.jsonl", ".model"}

    # a live process's temp file and another host's are not touched
    live = out / f".x.jsonl.tmp-{writers._host()}-{os.getpid()}-abc.tmp"
    foreign = out / ".y.jsonl.tmp-0000beef-1-abc.tmp"
    live.write_text("")
    foreign.write_text("")

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(GOOD) + "\n")
    convert = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "convert", str(src), str(out / "big.jsonl")],
        capture_output=True,
        text=True,
    )
    assert convert.returncode == 0, convert.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(["big.jsonl", live.name, foreign.name])
    assert json.loads((out / "big.jsonl").read_text())["label"] == "entailment"


def test_sweep_once_per_folder_and_never_through_a_link(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    real = tmp_path / "real"
    real.mkdir()
    stale = tmp_path / f".m.tmp-{writers._host()}-{dead}-q"
    stale.symlink_to(real, target_is_directory=True)
    old = tmp_path / f".m.old-{writers._host()}-{dead}-r"
    old.mkdir()
    (old / "weights.bin").write_text("w")
    assert sorted(remove_stale_temps(tmp_path)) == sorted([stale.name, old.name])
    assert real.is_dir() and not stale.exists() and not old.exists()
    again = tmp_path / f".n.tmp-{writers._host()}-{dead}-s"
    again.write_text("")
    assert remove_stale_temps(tmp_path) == []  # swept already in this process
    assert work_dir_for(tmp_path / "n").name.startswith(".n.tmp-")
    assert again.exists()
    assert remove_stale_temps(tmp_path, again=True) == [again.name]


def test_an_output_moved_aside_by_a_killed_publish_is_put_back(tmp_path: Path) -> None:
    dead = 2**22 + 777
    aside = tmp_path / f".clf.old-{writers._host()}-{dead}-z"
    (aside / "old").mkdir(parents=True)
    (aside / "old" / "model.txt").write_text("the previous model")
    half = tmp_path / f".clf.tmp-{writers._host()}-{dead}-y"
    half.mkdir()
    (half / "model.txt").write_text("half")
    done = tmp_path / f".other.old-{writers._host()}-{dead}-x"
    (done / "old").mkdir(parents=True)
    (tmp_path / "other").mkdir()  # the new output was published: the old one can go
    assert sorted(remove_stale_temps(tmp_path)) == sorted([aside.name, half.name, done.name])
    assert (tmp_path / "clf" / "model.txt").read_text() == "the previous model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clf", "other"]


def test_a_sampling_folder_keeps_hidden_tmp_files_zdebias_did_not_name(tmp_path: Path) -> None:
    """Issue 52 (foreign files): resuming a sampling run removed every ``.*.tmp`` in its
    folder (a user's ``.notes.tmp`` too; a folder so named ended in a traceback)."""
    from zdebias.data.writers import _temp_prefix
    from zdebias.generation.store import _clean_leftovers

    ours = tmp_path / f"{_temp_prefix('shard-3.jsonl')}x1y2.tmp"
    ours.write_text("half a shard")
    user = tmp_path / ".notes.tmp"
    user.write_text("mine")
    (tmp_path / ".cache.tmp").mkdir()
    _clean_leftovers(tmp_path, {"shards": []})
    assert not ours.exists()
    assert user.read_text() == "mine" and (tmp_path / ".cache.tmp").is_dir()
