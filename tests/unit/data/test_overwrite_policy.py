"""What ``--overwrite`` may replace: only what zdebias wrote; never a foreign folder, the current
directory, an input or a folder holding one, nor anything through a symlink. Checked before any
work (a model is never trained only to be thrown away)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_main import run_main
from zdebias.data.writers import OUTPUT_MARKER, check_out_dir, written_by_zdebias
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


def _foreign(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    return folder


@pytest.mark.parametrize("command", ["train-classifier", "filter", "sample"])
def test_overwrite_refuses_what_zdebias_did_not_write(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    monkeypatch.chdir(tmp_path)
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
        str(foreign): "foreign: not a folder zdebias wrote",
        str(tmp_path / "in"): f"in is or holds the input {data}",
    }
    for out, message in refusals.items():
        if command == "sample" and out.endswith("/in"):
            continue  # sample reads a generator, not a data file
        code, err = _main([*args, "--out", out, "--overwrite"], capsys)
        assert code == 2 and err.startswith("error: ") and message in err, (out, err)
        assert err.count("\n") == 0
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
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
    assert code == 2 and "a-folder.jsonl: not a folder zdebias wrote" in err


def test_what_counts_as_written_by_zdebias(tmp_path: Path) -> None:
    cases = {
        "marker": (OUTPUT_MARKER, "{}", True),
        "run": ("manifest.json", '{"stages": []}', True),
        "other-manifest": ("manifest.json", '{"name": "npm"}', False),
        "classifier": ("metrics.json", '{"n_train": 3}', True),
        "other-metrics": ("metrics.json", "[1, 2]", False),
        "generator": ("zdebias_generator.json", "{}", True),
        "samples": ("state.json", '{"shards": []}', True),
        "broken": ("state.json", "{", False),
    }
    for name, (file, text, own) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / file).write_text(text)
        assert written_by_zdebias(folder) is own, name
        if not own:
            with pytest.raises(ConfigError, match="not a folder zdebias wrote"):
                check_out_dir(folder, overwrite=True, own_only=True)
        else:
            check_out_dir(folder, overwrite=True, own_only=True)
