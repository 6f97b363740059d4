"""What ``--overwrite`` may replace: only a folder that holds zdebias's ownership marker; never a
foreign folder (whatever files it holds), the current directory, an input or a folder holding
one, nor anything through a symlink. Checked before any work (a model is never trained only to
be thrown away), and every input and setting is checked before anything is removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data.ownership import owner_of
from zdebias.data.writers import OUTPUT_MARKER, check_out_dir, mark_owned
from zdebias.errors import ConfigError

LABELS = ("entailment", "neutral", "contradiction")


def _data(path: Path, n: int = 6) -> Path:
    rows = [
        {"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i}", "label": LABELS[i % 3]}
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run_main(["-q", *args])
    return code, capsys.readouterr().err.strip()


#: files that zdebias 0.2 took as its signature (so --overwrite replaced a user's folder)
LOOK_ALIKES = {
    "manifest.json": '{"stages": []}',
    "state.json": '{"shards": []}',
    "metrics.json": '{"n_train": 3}',
}


def _foreign(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    for name, text in LOOK_ALIKES.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work in ``tmp_path`` (relative paths, and the current-directory refusal)."""
    monkeypatch.chdir(tmp_path)


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("command", ["train-classifier", "filter", "sample"])
def test_overwrite_refuses_what_zdebias_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, in_tmp: None
) -> None:
    data = _data(tmp_path / "in" / "d.jsonl")
    foreign = _foreign(tmp_path / "foreign")
    link = tmp_path / "link"
    link.symlink_to(foreign, target_is_directory=True)
    args = {
        "train-classifier": ["train-classifier", "--train", data, "--model", "no-such-model"],
        "filter": ["filter", data],
        "sample": ["sample", "--generator", "no-such-generator", "--n", "3"],
    }[command]
    refusals = {
        ".": ". is the current directory or a parent of it",
        str(tmp_path): "is the current directory or a parent of it",
        str(link): "link is a symbolic link",
        str(foreign): "foreign holds files zdebias did not write; choose a new --out or empty it",
        str(tmp_path / "in"): f"in is or holds the input {data}",
    }
    for out, message in refusals.items():
        if command == "sample" and out.endswith("/in"):
            continue  # sample reads a generator, not a data file
        code, err = _main([*args, "--out", out, "--overwrite"], capsys)
        assert code == 2 and err.startswith("error: ") and message in err, (out, err)
        assert err.count("\n") == 0
    assert sorted(p.name for p in foreign.iterdir()) == sorted(["notes.txt", *LOOK_ALIKES])
    assert data.is_file() and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign", "in", "link"]


def test_overwrite_replaces_a_folder_zdebias_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path / "d.jsonl", 9)
    out = tmp_path / "f"
    assert _main(["filter", data, "--out", out], capsys)[0] == 0
    first = json.loads((out / OUTPUT_MARKER).read_text())
    assert first["files"] == ["kept.jsonl", "rejected.jsonl", "summary.json"]
    code, err = _main(["filter", data, "--out", out], capsys)
    assert code == 2 and "exists and is not empty; pass --overwrite" in err
    assert _main(["filter", data, "--out", out, "--overwrite", "--biased-k", "1"], capsys)[0] == 0
    assert json.loads((out / "summary.json").read_text())["biased_k"] == 1
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_convert_never_overwrites_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path / "d.jsonl")
    before = data.read_bytes()
    code, err = _main(["convert", data, data, "--overwrite"], capsys)
    assert code == 2 and err == f"error: {data} is or holds the input {data}; choose another --out"
    assert data.read_bytes() == before
    folder = tmp_path / "a-folder.jsonl"  # a suffix convert writes (issue 27: else refused)
    folder.mkdir()
    (folder / "x").write_text("")
    code, err = _main(["convert", data, folder, "--overwrite"], capsys)
    assert code == 2 and "a-folder.jsonl holds files zdebias did not write" in err


def test_only_the_marker_makes_a_folder_zdebias_s(tmp_path: Path) -> None:
    cases = {
        "marker": ({OUTPUT_MARKER: '{"kind": "output"}'}, True),
        "marker-0.2": ({OUTPUT_MARKER: '{"files": ["kept.jsonl"]}', "kept.jsonl": ""}, True),
        "run-look-alike": ({"manifest.json": '{"stages": []}'}, False),
        "classifier-look-alike": ({"metrics.json": '{"n_train": 3}'}, False),
        "generator-look-alike": ({"zdebias_generator.json": "{}"}, False),
        "samples-look-alike": ({"state.json": '{"shards": []}'}, False),
        "broken-marker": ({OUTPUT_MARKER: "{"}, False),
        "list-marker": ({OUTPUT_MARKER: "[]"}, False),
    }
    for name, (files, own) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        for file, text in files.items():
            (folder / file).write_text(text)
        assert (owner_of(folder) is not None) is own, name
        if own:
            check_out_dir(folder, overwrite=True)
            continue
        with pytest.raises(ConfigError) as info:
            check_out_dir(folder, overwrite=True)
        message = f"{folder} holds files zdebias did not write; choose a new --out or empty it"
        assert str(info.value).startswith(message), name
        old = "if an older zdebias wrote it: its folders carry no .zdebias-output.json"
        assert (old in str(info.value)) is ("look-alike" in name), name
    empty = tmp_path / "empty"
    empty.mkdir()
    check_out_dir(empty, overwrite=False)


def _owned(folder: Path) -> Path:
    """A folder as zdebias leaves it: the marker and a file."""
    folder.mkdir(parents=True)
    (folder / "model.txt").write_text("trained before")
    mark_owned(folder, "model")
    return folder


#: each command with an output folder, given one input or setting that is wrong
BAD_CALLS = {
    "filter": ["filter", "{missing}"],
    "combine": ["combine", "--original", "{data}", "--generated", "{missing}"],
    "train-classifier": ["train-classifier", "--train", "{data}", "--model", "no-such-model"],
    "confidence-filter": ["confidence-filter", "{data}", "--classifier", "no-such-model"],
    "train-generator": ["train-generator", "--model", "no-such-model", "--train", "{missing}"],
    "debias-generator": ["debias-generator", "--generator", "NOT_A_GENERATOR", "--train", "{data}"],
    "sample": ["sample", "--generator", "NOT_A_GENERATOR", "--n", "2"],
    "counterfactual-train": ["counterfactual", "train", "--train", "{missing}"],
    "counterfactual-generate": [
        "counterfactual", "generate", "{data}", "--infiller", "NOT_AN_INFILLER",
        "--classifier", "no-such-model",
    ],
    "convert": ["convert", "{missing}", "{own}", "--to", "datasets"],
    "demo-data": ["demo-data", "{own}", "--n-train", "-1"],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(BAD_CALLS))
def test_overwrite_checks_every_input_before_removing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, in_tmp: None
) -> None:
    data = _data(tmp_path / "d.jsonl")
    own = _owned(tmp_path / "own")
    before = _contents(own)
    args = [a.format(data=data, missing="missing.jsonl", own=own) for a in BAD_CALLS[command]]
    if "{own}" not in BAD_CALLS[command]:
        args += ["--out", str(own)]
    code, err = _main([*args, "--overwrite"], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 0, err
    assert "own" not in err.split(":")[1], err  # it failed on the input, not on the output
    assert _contents(own) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "own"]


def test_a_folder_being_claimed_is_never_foreign_to_a_second_claimer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes claiming one new folder at once (`sample --worker 0/2` and `1/2` started
    together): at the worst moment, the first one's marker written but not yet renamed into
    place, the second one must find the folder empty, not holding files zdebias did not write."""
    import os

    from zdebias.data import writers
    from zdebias.data.ownership import MARKER, check_ours

    out = tmp_path / "w"
    seen: list[list[str]] = []
    replace = os.replace

    def at_rename(src: str, dst: str) -> None:
        if not seen:  # the first claimer's rename: the second one steps in just before it
            seen.append(sorted(p.name for p in out.iterdir()))
            check_ours(out)  # no ConfigError
            writers.claim(out, "samples")  # and it claims the folder too
        replace(src, dst)

    monkeypatch.setattr(writers.os, "replace", at_rename)
    writers.claim(out, "samples")
    monkeypatch.undo()
    assert seen[0] == []  # the first claimer's temp file was beside the folder, not in it
    assert sorted(p.name for p in out.iterdir()) == [MARKER]
    assert owner_of(out) == {"zdebias": owner_of(out)["zdebias"], "kind": "samples"}
    assert [p.name for p in tmp_path.iterdir()] == ["w"]  # no temp file left beside it
