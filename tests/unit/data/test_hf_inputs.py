"""HF ``datasets`` inputs without the hub: ``hf:`` through ``load_dataset`` (cached, not
streaming), ``save_to_disk`` folders, Arrow files, ``convert --to datasets``, and recipe hashes
that follow the loaded dataset's fingerprint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.files import detect_format
from zdebias.data.hf import fingerprint, parse_spec
from zdebias.data.readers import open_dataset, read_records
from zdebias.errors import ConfigError, DataError
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.runner import run_recipe

datasets = pytest.importorskip("datasets")
LABELS = ["entailment", "neutral", "contradiction"]
ROWS = [
    {"premise": "A man sleeps.", "hypothesis": "A man naps.", "label": "entailment"},
    {"premise": "A dog runs.", "hypothesis": "A cat sits.", "label": "contradiction"},
    {"premise": "Kids play.", "hypothesis": "Kids play ball.", "label": "-"},
    {"premise": "A cat sits.", "hypothesis": "It is tired.", "label": "neutral"},
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private datasets cache per test (load_dataset writes Arrow files there)."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _dataset(rows: list[dict[str, str]]) -> object:
    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=LABELS),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "premise": [r["premise"] for r in rows],
            "hypothesis": [r["hypothesis"] for r in rows],
            "label": [LABELS.index(r["label"]) if r["label"] in LABELS else -1 for r in rows],
        },
        features=features,
    )


def test_spec_with_config_split_and_revision() -> None:
    assert parse_spec("hf:stanfordnlp/snli") == ("stanfordnlp/snli", None, "train", None)
    assert parse_spec("hf:nyu-mll/glue@sst2:validation@bcdcba7") == (
        "nyu-mll/glue",
        "sst2",
        "validation",
        "bcdcba7",
    )
    assert parse_spec("hf:stanfordnlp/snli:@v1") == ("stanfordnlp/snli", None, "train", "v1")
    with pytest.raises(ConfigError, match="no dataset name"):
        parse_spec("hf:@x:train")


def test_hf_loads_through_the_cache_not_streaming(tmp_path: Path, _cache: Path) -> None:
    _jsonl(tmp_path / "d" / "train.jsonl", ROWS)
    view = open_dataset(f"hf:{tmp_path / 'd'}:train")
    records = list(view)
    assert [r.label for r in records] == ["entailment", "contradiction", "neutral"]
    assert view.report.n_unlabelled == 1
    # non-streaming: the rows were prepared as Arrow files in the cache, read again from there
    cached = sorted(p.name for p in _cache.rglob("*.arrow"))
    assert cached == ["d-train.arrow"]
    assert [r.hypothesis for r in open_dataset(f"hf:{tmp_path / 'd'}:train")] == [
        "A man naps.",
        "A cat sits.",
        "It is tired.",
    ]
    with pytest.raises(DataError, match=r"^hf:.*nope: could not load HF dataset"):
        list(open_dataset(f"hf:{tmp_path / 'nope'}"))


def test_fingerprint_follows_the_data(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    _jsonl(folder / "train.jsonl", ROWS)
    first = fingerprint(f"hf:{folder}:train")
    assert first["n_rows"] == 4 and fingerprint(f"hf:{folder}:train") == first
    _jsonl(folder / "train.jsonl", ROWS[:2])
    second = fingerprint(f"hf:{folder}:train")
    assert second["n_rows"] == 2 and second["fingerprint"] != first["fingerprint"]


def test_save_to_disk_folders_and_arrow_files(tmp_path: Path) -> None:
    ds = _dataset(ROWS)
    ds.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": ds, "test": ds.select([0, 1])}).save_to_disk(
        str(tmp_path / "two")
    )
    assert detect_format(tmp_path / "one") == "hf-disk"
    one = open_dataset(tmp_path / "one")
    assert [r.label for r in one] == ["entailment", "contradiction", "neutral"]
    assert one.report.n_unlabelled == 1
    assert [r.id for r in read_records(f"{tmp_path / 'two'}::test")] == ["two/test:1", "two/test:2"]
    with pytest.raises(DataError, match=r"folder holds splits train, test; name one as"):
        read_records(tmp_path / "two")
    # the Arrow shard save_to_disk wrote (IPC stream format), ClassLabel names included
    shard = next((tmp_path / "one").glob("*.arrow"))
    assert detect_format(shard) == "arrow"
    assert [r.label for r in read_records(shard)] == ["entailment", "contradiction", "neutral"]
    # an Arrow IPC *file* (what pyarrow.ipc.new_file writes), labels as names
    import pyarrow as pa

    table = pa.Table.from_pylist(ROWS)
    with (
        pa.OSFile(str(tmp_path / "rows.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    assert [r.label for r in read_records(tmp_path / "rows.arrow")] == [
        "entailment",
        "contradiction",
        "neutral",
    ]
    (tmp_path / "bad.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DataError, match=r"bad.arrow: not a readable Arrow file"):
        read_records(tmp_path / "bad.arrow")


def test_convert_writes_a_datasets_folder(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "ds"
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(src), str(out), "--to", "datasets", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_records"] == 3
    loaded = datasets.load_from_disk(str(out))
    assert loaded.features["label"].names == LABELS
    assert loaded["label"] == [0, 2, 1]
    assert loaded["id"] == ["in.jsonl:1", "in.jsonl:2", "in.jsonl:4"]
    assert (out / ".zdebias-output.json").is_file()
    # read back: the same records
    assert [r.to_dict() for r in read_records(out)] == [r.to_dict() for r in read_records(src)]
    again = runner.invoke(app, ["convert", str(src), str(out), "--to", "datasets"])
    assert isinstance(again.exception, ConfigError)
    assert "exists and is not empty" in str(again.exception)
    redo = ["convert", str(src), str(out), "--to", "datasets", "--overwrite", "--limit", "1"]
    assert runner.invoke(app, redo).exit_code == 0
    assert datasets.load_from_disk(str(out)).num_rows == 1
    bad = runner.invoke(app, ["convert", str(src), str(tmp_path / "x"), "--to", "xml"])
    assert isinstance(bad.exception, ConfigError)
    assert "expected one of jsonl, csv, tsv, parquet, datasets" in str(bad.exception)


class _CountConfig(StageConfig):
    input: Annotated[str, Ref("records")]


CALLS: list[int] = []


@register_stage("t-hf-count", config=_CountConfig, outputs={"summary": "json"})
def _count(cfg: _CountConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    n = len(inputs.records("input"))
    CALLS.append(n)
    (ctx.out_dir / "n.json").write_text(json.dumps({"n": n}))
    return StageResult({"summary": "n.json"})


def test_a_recipe_reruns_when_the_hf_dataset_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "hub"
    _jsonl(folder / "train.jsonl", ROWS)
    recipe = recipe_from_dict(
        {
            "name": "hf",
            "data": {"train": f"hf:{folder}:train"},
            "stages": {"count": {"stage": "t-hf-count", "input": "train"}},
        }
    )
    CALLS.clear()
    run_recipe(recipe, tmp_path / "run")
    run_recipe(recipe, tmp_path / "run")
    assert CALLS == [3]  # same data: done, skipped
    _jsonl(folder / "train.jsonl", ROWS[:2])
    run_recipe(recipe, tmp_path / "run")
    assert CALLS == [3, 2]  # a changed dataset behind the same name reruns
