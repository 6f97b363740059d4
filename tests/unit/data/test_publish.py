"""Atomic model-folder publishing: refusals, overwrite, and no half-written folder ever."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from zdebias.data import writers as publish
from zdebias.data.writers import OUTPUT_MARKER as OWNER
from zdebias.data.writers import check_out_dir, publish_dir, work_dir_for
from zdebias.errors import ConfigError


def _finished(out: Path, text: str) -> Path:
    work = work_dir_for(out)
    (work / "model.txt").write_text(text)
    return work


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_work_dir_is_an_empty_hidden_sibling(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "clf"
    work = work_dir_for(out)
    assert work.parent == out.parent and work.is_dir() and not list(work.iterdir())
    assert work.name.startswith(".clf.tmp-") and not out.exists()


def test_publish_new_and_empty_out(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert publish_dir(_finished(out, "one"), out, overwrite=False) == out
    assert (out / "model.txt").read_text() == "one"
    empty = tmp_path / "empty"
    empty.mkdir()
    publish_dir(_finished(empty, "two"), empty, overwrite=False)
    assert (empty / "model.txt").read_text() == "two"
    assert _hidden(tmp_path) == []


def test_non_empty_out_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    work = _finished(out, "new")
    with pytest.raises(ConfigError, match="m holds files zdebias did not write"):
        publish_dir(work, out, overwrite=True)  # not zdebias's: never replaced
    publish.mark_owned(out, "model")
    with pytest.raises(ConfigError, match="not empty; pass --overwrite"):
        publish_dir(work, out, overwrite=False)
    assert sorted(p.name for p in out.iterdir()) == [OWNER, "notes.txt"] and work.is_dir()
    publish_dir(work, out, overwrite=True)
    assert [p.name for p in out.iterdir()] == ["model.txt"]
    assert _hidden(tmp_path) == []
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        check_out_dir(a_file, overwrite=False)
    publish_dir(_finished(a_file, "dir now"), a_file, overwrite=True)
    assert (a_file / "model.txt").read_text() == "dir now"
    assert _hidden(tmp_path) == []


def test_symlink_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        publish_dir(_finished(link, "x"), link, overwrite=True)
    assert link.is_symlink() and (target / "keep.txt").read_text() == "keep"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="symbolic link"):
        check_out_dir(dangling, overwrite=True)


def test_current_directory_and_its_parents_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    (here / "data.txt").write_text("x")
    monkeypatch.chdir(here)
    for out in (Path("."), here, tmp_path / "a", Path("..")):
        with pytest.raises(ConfigError, match="current directory"):
            check_out_dir(out, overwrite=True)
    assert (here / "data.txt").exists()


def test_a_failed_rename_puts_the_old_folder_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "model.txt").write_text("old")
    publish.mark_owned(out, "model")
    work = _finished(out, "new")
    real_replace = os.replace

    def failing(src: os.PathLike, dst: os.PathLike) -> None:
        if Path(src) == work:
            raise OSError("disk trouble")
        real_replace(src, dst)

    monkeypatch.setattr(publish.os, "replace", failing)
    with pytest.raises(OSError, match="disk trouble"):
        publish_dir(work, out, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [OWNER, "model.txt"]
    assert (out / "model.txt").read_text() == "old"
    assert _hidden(tmp_path) == [work.name]  # the caller's work folder, nothing else


def test_write_together_changes_all_files_or_none(tmp_path: Path) -> None:
    from zdebias.data.readers import read_records
    from zdebias.data.schema import Record
    from zdebias.data.writers import write_together

    kept, md, doc = tmp_path / "kept.jsonl", tmp_path / "t.md", tmp_path / "r.json"
    records = [Record("a", "neutral", "p", "h"), Record("b", "entailment", "q", "i")]
    write_together({kept: records, md: "# old\n", doc: {"n": 2}})
    assert [r.id for r in read_records(kept)] == ["a", "b"]
    assert md.read_text() == "# old\n" and json.loads(doc.read_text()) == {"n": 2}
    with pytest.raises(TypeError, match="not JSON serialisable"):
        write_together({kept: records[:1], md: "# new\n", doc: {"n": object()}})
    assert [r.id for r in read_records(kept)] == ["a", "b"] and md.read_text() == "# old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl", "r.json", "t.md"]


def test_a_failed_publish_leaves_the_older_output_whole(tmp_path: Path) -> None:
    from zdebias.data.schema import Record
    from zdebias.data.writers import OUTPUT_MARKER, publish_files

    out = tmp_path / "f"
    old = [Record("a", "neutral", "p", "h")]
    publish_files(out, {"kept.jsonl": old, "rejected.jsonl": old, "summary.json": {"run": 1}})
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def kept_then_crash():  # the new kept list is half written when the run dies
        yield Record("b", "entailment", "q", "i")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        publish_files(
            out,
            {"kept.jsonl": kept_then_crash(), "rejected.jsonl": [], "summary.json": {"run": 2}},
            overwrite=True,
        )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(before) == [OUTPUT_MARKER, "kept.jsonl", "rejected.jsonl", "summary.json"]
    assert _hidden(tmp_path) == []
