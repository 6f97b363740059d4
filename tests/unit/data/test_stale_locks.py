"""Issue 40: the ``.NAME.lock`` file a killed publisher leaves is removed by the next writer
into its folder, only while free and only when its pid is gone; a locker that meets such a
removal waits for it and locks the next file."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from zdebias.data.locks import lock_path, lock_text, output_lock, remove_stale_lock
from zdebias.data.writers import work_dir_for
from zdebias.errors import ConfigError

HOLD = (
    "import sys\n"
    "from zdebias.data.locks import output_lock\n"
    "with output_lock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[3] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _holder(out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_publisher_s_lock_file_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    killed, live = tmp_path / "killed", tmp_path / "live"
    proc = _holder(killed)
    proc.kill()
    proc.wait()
    left = lock_path(killed)
    assert left.read_text() == lock_text(proc.pid)  # what a killed run leaves
    holder = _holder(live)  # a live holder's file is left alone
    user = tmp_path / ".notes.lock"
    user.write_text("mine\n")  # not a pid: not a lock file zdebias wrote
    empty = tmp_path / ".worker.lock"
    empty.write_text("")
    try:
        work_dir_for(tmp_path / "other")  # the next writer into the folder
        assert not left.exists()
        assert lock_path(live).read_text() == lock_text(holder.pid)
        assert user.read_text() == "mine\n" and empty.read_text() == ""
    finally:
        holder.communicate("", timeout=30)
    assert not lock_path(live).exists()


def test_a_held_or_changed_lock_file_is_not_removed(tmp_path: Path) -> None:
    lock = tmp_path / ".out.lock"
    lock.write_text(lock_text(_dead_pid()))
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held (by a sweep or a child)
        assert remove_stale_lock(lock) is False and lock.exists()
    finally:
        os.close(fd)
    lock.write_text(lock_text())  # a live pid
    assert remove_stale_lock(lock) is False and lock.exists()
    lock.write_text(lock_text(_dead_pid()))
    assert remove_stale_lock(lock) is True and not lock.exists()
    assert remove_stale_lock(lock) is False  # gone already


def test_a_locker_waits_for_a_sweep_and_locks_the_next_file(tmp_path: Path) -> None:
    """A sweep holds a dead holder's file while it removes it: a locker meeting it does not
    fail with the dead pid; it locks a new file once the sweep has removed the old one."""
    out = tmp_path / "out"
    lock = lock_path(out)
    lock.write_text(lock_text(_dead_pid()))
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def sweep() -> None:
        time.sleep(0.1)
        os.unlink(lock)
        os.close(fd)

    thread = threading.Thread(target=sweep)
    thread.start()
    start = time.monotonic()
    try:
        with output_lock(out):  # the old code failed here, naming the dead pid
            assert time.monotonic() - start >= 0.1  # after the sweep let go
            assert lock.read_text() == lock_text()
    finally:
        thread.join()
    assert not lock.exists()


def test_a_live_holder_still_refuses_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = _holder(out)
    try:
        start = time.monotonic()
        with pytest.raises(ConfigError) as info, output_lock(out):
            pass
        assert time.monotonic() - start < 1.0
        assert (
            str(info.value)
            == f"{out} is being written by another zdebias process (pid {holder.pid})"
        )
    finally:
        holder.communicate("", timeout=30)


# issue 52.5: a lock file zdebias did not write is never removed nor used


def test_another_tools_lock_holding_a_dead_pid_is_left_alone(tmp_path: Path) -> None:
    """The sweep removed any ``.X.lock`` holding a dead pid: another tool's too."""
    dead = _dead_pid()
    theirs = tmp_path / ".mytool.lock"
    theirs.write_text(f"{dead}\n")
    other_host = tmp_path / ".elsewhere.lock"
    other_host.write_text(f"zdebias-lock pid={dead} host=00000000\n")
    ours = tmp_path / ".killed.lock"
    ours.write_text(lock_text(dead))
    not_a_lock_name = tmp_path / "killed.lock"
    not_a_lock_name.write_text(lock_text(dead))
    work_dir_for(tmp_path / "other")  # the next writer into the folder sweeps it
    assert theirs.read_text() == f"{dead}\n"
    assert other_host.exists() and not_a_lock_name.exists()
    assert not ours.exists()


def test_a_foreign_file_at_the_lock_path_is_named_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock = lock_path(out)
    lock.write_text("my notes\n")
    with pytest.raises(ConfigError) as info, output_lock(out):
        pass
    assert str(info.value).startswith(f"{lock} is in the way of {out}'s lock")
    assert lock.read_text() == "my notes\n"
    lock.write_text(f"{os.getpid()}\n")  # a live process's pid file
    with pytest.raises(ConfigError), output_lock(out):
        pass
    assert lock.read_text() == f"{os.getpid()}\n"
    lock.write_text(f"{_dead_pid()}\n")  # what an earlier zdebias left when killed: reused
    with output_lock(out):
        assert lock.read_text() == lock_text()
    assert not lock.exists()


def test_a_lock_path_that_is_a_folder_or_a_link_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock = lock_path(out)
    lock.mkdir()
    (lock / "keep.txt").write_text("x")
    with pytest.raises(ConfigError) as info, output_lock(out):
        pass
    assert str(info.value).startswith(f"{lock} is a folder, where {out}'s lock file goes")
    assert (lock / "keep.txt").read_text() == "x"
    lock_b = lock_path(tmp_path / "b")
    target = tmp_path / "target.txt"
    target.write_text("theirs\n")
    lock_b.symlink_to(target)
    with pytest.raises(ConfigError) as info, output_lock(tmp_path / "b"):
        pass
    assert "is a symbolic link" in str(info.value)
    assert target.read_text() == "theirs\n"  # was truncated and overwritten by the pid


@pytest.mark.parametrize(("command", "name"), [("filter", "o"), ("convert", "o.csv")])
def test_a_folder_at_the_lock_path_exits_2_with_one_line(
    tmp_path: Path, command: str, name: str
) -> None:
    """``filter`` with ``.o.lock`` a folder ended in a traceback."""
    data = tmp_path / "d.jsonl"
    labels = ("entailment", "neutral", "contradiction")
    data.write_text(
        "".join(
            f'{{"premise": "p {i}", "hypothesis": "h {i}", "label": "{labels[i % 3]}"}}\n'
            for i in range(30)
        )
    )
    out = tmp_path / name
    lock_path(out).mkdir()
    args = ["--out", str(out)] if command == "filter" else [str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "-q", command, str(data), *args],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is a folder" in proc.stderr, proc.stderr
    assert not out.exists()


def test_a_workers_lock_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    from zdebias.generation.workers import LOCK, worker_lock

    folder = tmp_path / "worker-0-of-2"
    folder.mkdir()
    (folder / LOCK).mkdir()
    with pytest.raises(ConfigError, match="is a folder, where the worker's lock file goes"):
        with worker_lock(folder):
            pass
    with worker_lock(tmp_path / "worker-1-of-2"):  # a plain one still works
        assert (tmp_path / "worker-1-of-2" / LOCK).is_file()
