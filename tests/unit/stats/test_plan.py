"""How a z-filter of a file runs is decided once, in the library
(zdebias.stats.execution.plan), as a value: sharded for a large plain JSONL file, a writer
process for a mid-sized one, one process otherwise."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from zdebias.data.options import ReadOptions
from zdebias.features import parallel
from zdebias.stats.execution import plan
from zdebias.stats.execution.plan import FilterPlan, plan_filter
from zdebias.stats.settings import ZFilterSettings


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A JSONL file of about 6 kB, planned as if 4 cores, 4 kB and 2 kB were the sizes."""
    monkeypatch.setattr(parallel, "available_cores", lambda: 4)
    monkeypatch.setattr(plan, "SHARD_MIN_BYTES", 4000)
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 2000)
    path = tmp_path / "train.jsonl"
    rows = [
        {"id": f"r{i}", "premise": f"a man {i}", "hypothesis": "a man", "label": "neutral"}
        for i in range(100)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_large_file_is_sharded_one_range_per_core(data: Path) -> None:
    got = plan_filter(str(data), ReadOptions(), ZFilterSettings())
    assert got.way == "sharded" and got.num_proc == 4 and len(got.ranges) == 4
    assert got.ranges[0][0] == 0 and got.ranges[-1][1] == data.stat().st_size
    assert got.kept_from_matrix
    two = plan_filter(str(data), ReadOptions(), ZFilterSettings(num_proc=2))
    assert two.way == "sharded" and len(two.ranges) == 2


def test_a_mid_sized_file_gets_a_writer_process(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan, "SHARD_MIN_BYTES", 1 << 30)
    got = plan_filter(str(data), ReadOptions(), ZFilterSettings())
    assert got == FilterPlan("writer", size=data.stat().st_size)


@pytest.mark.parametrize(
    ("read", "settings", "seed", "from_matrix"),
    [
        (ReadOptions(), ZFilterSettings(num_proc=1), None, True),  # --num-proc 1
        (ReadOptions(limit=10), ZFilterSettings(), None, True),  # --limit
        (ReadOptions(), ZFilterSettings(), "seed.jsonl", False),  # a seed dataset
        (ReadOptions(), ZFilterSettings(hypo_only_model="m"), None, False),  # a trained model
        (ReadOptions(), ZFilterSettings(ngram_fields=("premise",)), None, False),  # no hypothesis
    ],
)
def test_one_process_otherwise(
    data: Path, read: ReadOptions, settings: ZFilterSettings, seed: str | None, from_matrix: bool
) -> None:
    got = plan_filter(str(data), read, settings, seed_data=seed)
    assert got.way == "one" and got.ranges == () and got.size is None
    assert got.kept_from_matrix == from_matrix  # else the kept records' features extracted


def test_one_process_for_a_small_gzipped_or_other_file(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan, "SHARD_MIN_BYTES", 1 << 30)
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 1 << 30)
    assert plan_filter(str(data), ReadOptions(), ZFilterSettings()).way == "one"  # small
    gz = tmp_path / "train.jsonl.gz"
    gz.write_bytes(gzip.compress(data.read_bytes()))
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 0)
    assert plan_filter(str(gz), ReadOptions(format="jsonl"), ZFilterSettings()).way == "one"
    csv = tmp_path / "train.csv"
    csv.write_text("premise,hypothesis,label\na,b,neutral\n")
    assert plan_filter(str(csv), ReadOptions(), ZFilterSettings()).way == "one"
    monkeypatch.setattr(parallel, "available_cores", lambda: 1)
    assert plan_filter(str(data), ReadOptions(), ZFilterSettings()).way == "one"  # one core


def test_one_process_writes_with_the_processes_asked_for(data: Path) -> None:
    assert plan_filter(str(data), ReadOptions(), ZFilterSettings(num_proc=1)).num_proc == 1
    every = plan_filter(str(data), ReadOptions(limit=5), ZFilterSettings(num_proc=0))
    assert every == FilterPlan("one", num_proc=4)
