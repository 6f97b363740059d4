"""The z-filter's batch size scaled to the data (issue 27): small data is filtered, the rule
is recorded, a batch that leaves significant features says so; summaries use today's option
names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_stats_cli import _dataset  # the 300-row file with planted artifacts

from helpers.cli_main import run_main
from zdebias.stats.settings import ZFilterSettings
from zdebias.stats.zfilter import z_filter
from zdebias.stats.zstats import z_from_counts

RULE = "min(1000, ceil(n_input / 20))"
#: the settings a z-filter summary records, by their option names (docs/names.md)
SETTINGS = {"biased_k", "zfilter_batch_size", "shuffle", "seed", "min_z", "features"}


def _filter(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[list[str], list[str], dict]:
    """``zdebias filter ARGS --out OUT``: stdout and stderr lines, and summary.json."""
    out = Path(str(args[-1]))
    assert run_main(["filter", *args]) == 0
    captured = capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    return captured.out.splitlines(), captured.err.splitlines(), summary


def test_sst2_dev_is_filtered_with_batches_scaled_to_its_872_rows(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # main kept all 872 rows: one batch of 1,000, accepted whole
    dev = data_dir / "sst2" / "dev.tsv"
    args = [dev, "--label-map", "0=negative,1=positive", "--out", tmp_path / "f"]
    out, err, summary = _filter(capsys, *args)
    assert out[0] == "input 872: kept 546, rejected 326 (20 batches of 44, scaled to the data)"
    assert (summary["n_kept"], summary["n_rejected"]) == (546, 326)
    assert summary["zfilter_batch_size"] == 44 and summary["n_batches"] == 20
    assert summary["zfilter_batch_size_rule"] == RULE
    assert summary["warnings"] == [] and not [line for line in err if "significant" in line]


def test_a_planted_artifact_in_300_rows_is_filtered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 60% of the contradictions say "Nobody is sleeping"; main kept all 300 rows
    data = _dataset(tmp_path / "train.jsonl", 300, 0, "t")
    out, _, summary = _filter(capsys, data, "--out", tmp_path / "f")
    assert out[0] == "input 300: kept 58, rejected 242 (20 batches of 15, scaled to the data)"
    assert summary["zfilter_batch_size"] == 15
    assert (summary["n_significant_before"], summary["n_significant_after"]) == (29, 0)
    row = next(
        r
        for r in summary["top_before_after"]["contradiction"]
        if r["feature"] == "nobody@hypothesis"
    )
    assert (row["n_before"], row["n_after"]) == (62, 4)
    assert row["z_before"] > 11 and row["z_after"] < 3 < summary["z_critical"]


def test_a_batch_that_leaves_significant_features_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _dataset(tmp_path / "train.jsonl", 300, 0, "t")
    out, err, summary = _filter(capsys, data, "--zfilter-batch-size", 50, "--out", tmp_path / "f")
    line = (
        "11 features still significant after z-filtering (z > 3.83, batches of 50): "
        "a smaller --zfilter-batch-size filters more finely"
    )
    assert err == [f"{data}: {line}"] and summary["warnings"] == [line]
    assert out[0] == "input 300: kept 77, rejected 223 (6 batches of 50)"  # given: as given
    assert summary["zfilter_batch_size_rule"] == "given"
    assert summary["n_significant_after"] == 11


def test_filter_summary_records_the_settings_by_their_option_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _dataset(tmp_path / "train.jsonl", 60, 0, "t")
    args = [data, "--biased-k", 7, "--seed", 3, "--no-shuffle", "--min-z", 0.5]
    _, _, summary = _filter(capsys, *args, "--zfilter-batch-size", 9, "--out", tmp_path / "f")
    assert SETTINGS <= set(ZFilterSettings.model_fields)
    assert {key: summary[key] for key in SETTINGS} == {
        "biased_k": 7,
        "zfilter_batch_size": 9,
        "shuffle": False,
        "seed": 3,
        "min_z": 0.5,
        "features": "default",
    }
    assert not {"top_k", "batch_size", "shuffle_seed"} & set(summary)
    combine = ["--recipe", "seq-z", "--original", data, "--generated", data]
    assert run_main(["combine", *combine, "--biased-k", 7, "--out", tmp_path / "c"]) == 0
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert SETTINGS <= set(summary) and not {"top_k", "batch_size", "shuffle_seed"} & set(summary)
    assert summary["zfilter_batch_size"] is None and summary["zfilter_batch_size_rule"] == RULE
    assert [s["zfilter_batch_size"] for s in summary["stages"]] == [3, 3]


def test_records_api_scales_and_honours_the_batch(tmp_path: Path) -> None:
    from zdebias.data import read_records

    records = read_records(_dataset(tmp_path / "train.jsonl", 300, 0, "t"))
    scaled = z_filter(records)
    assert scaled.arrays is not None and scaled.arrays.batch_size == 15
    assert len(scaled.kept) == 58
    given = z_filter(records, zfilter_batch_size=1000)  # the paper's, as given: one batch
    assert given.arrays is not None and given.arrays.n_batches == 1 and len(given.kept) == 300
    z_after = z_from_counts(scaled.arrays.counts)[0]
    assert (z_after > scaled.summary["z_critical"]).sum() == 0


def test_python_api_tells_the_warning_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import zdebias

    path = _dataset(tmp_path / "train.jsonl", 300, 0, "t")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    out, summary = zdebias.z_filter(rows, zfilter_batch_size=50, return_summary=True)
    assert sum(row["keep"] for row in out) == 77 and len(summary["warnings"]) == 1
    assert summary["warnings"][0].startswith("11 features still significant")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == summary[
        "warnings"
    ]
