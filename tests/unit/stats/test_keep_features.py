"""``keep_features``: features that are the task. The z-filter never rejects a row for them,
the shortcut split never lets them vote, the statistics report them marked as kept; names,
globs and pattern files; CLI, recipe and Python API. Cases computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zdebias
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.keep import KeptFeatures, expand_patterns
from zdebias.stats.measure import measure
from zdebias.stats.settings import FilterSettings, StatsSettings, ZFilterSettings
from zdebias.stats.shortcut_split import split_records
from zdebias.stats.zfilter import ZFilterResult, z_filter

LABELS = ("hate", "neither")
#: unigrams only, one row per batch in file order, top-1: every step can be followed by hand
ONE_BY_ONE = dict(
    features=["unigrams"], biased_k=1, zfilter_batch_size=1, shuffle=False, labels=LABELS
)


def _rows() -> list[Record]:
    return [
        Record("1", "hate", text="idiot"),
        Record("2", "neither", text="nice"),
        Record("3", "hate", text="idiot yankees"),
        Record("4", "hate", text="yankees"),
    ]


def _outcome(result: ZFilterResult) -> tuple[list[str], list[tuple[str, list[str]]]]:
    return (
        [r.id for r in result.accepted],
        [(r.id, r.meta["rejected_by"]) for r in result.rejected],
    )


def test_a_kept_feature_rejects_no_row_and_the_next_feature_takes_its_place() -> None:
    # Without keep: 1 and 2 meet Z = {} and {1}; for row 3, B(hate) = {idiot} (z = (1 - 1/2) /
    # sqrt(1/4 / 1) = 1 from row 1), so idiot rejects it; row 4 carries only yankees, never
    # seen in Z: accepted.
    plain = z_filter(_rows(), **ONE_BY_ONE)
    assert _outcome(plain) == (["1", "2", "4"], [("3", ["idiot@text"])])
    # With idiot kept, B(hate) is the top-1 of the other features: nice (z -1) is not above 0,
    # so B(hate) is empty and row 3 joins Z; then yankees (z 1) is B(hate) and rejects row 4.
    kept = z_filter(_rows(), keep_features=["idiot@text"], **ONE_BY_ONE)
    assert _outcome(kept) == (["1", "2", "3"], [("4", ["yankees@text"])])
    block = kept.summary["kept_features"]
    assert block == {
        "patterns": ["idiot@text"],
        "n_features": 1,
        "n_significant_before": 0,
        "n_significant_after": 0,
        "unmatched": [],
    }
    assert kept.summary["keep_features"] == ["idiot@text"]
    assert "keep_features" not in plain.summary and "kept_features" not in plain.summary
    top_after = {r["feature"]: r.get("kept", False) for r in kept.summary["top_after"]["hate"]}
    assert top_after["idiot@text"] is True and top_after["yankees@text"] is False


def test_a_glob_keeps_every_feature_it_matches_and_a_miss_is_a_warning() -> None:
    names = ["idiot@text", "you idiot@text", "idiotic@text", "nice@text", "<null>"]
    kept = KeptFeatures.of(names, ["*idiot@text", "moron@text"])
    assert kept.mask.tolist() == [True, True, False, False, False]
    assert kept.unmatched == ["moron@text"]
    assert "'moron@text' matches no feature" in kept.warnings()[0]
    # an exact name matches itself even with glob characters in it; case counts
    assert KeptFeatures.of(["a[1]@text", "a1@text"], ["a[1]@text"]).mask.tolist() == [True, True]
    assert KeptFeatures.of(["Idiot@text"], ["idiot@text"]).unmatched == ["idiot@text"]
    result = z_filter(_rows(), keep_features=["idio?@text", "moron@text"], **ONE_BY_ONE)
    assert _outcome(result)[1] == [("4", ["yankees@text"])]
    assert result.summary["warnings"] == [
        "--keep-features 'moron@text' matches no feature of these rows (feature names look "
        "like 'word@text', 'two words@text', 'hypo-len<5'); it keeps nothing"
    ]


def test_a_file_of_patterns_and_comma_lists(tmp_path: Path) -> None:
    words = tmp_path / "task words.txt"
    words.write_text("# slurs stand-ins\nidiot@text\n\n  *moron*@text  \nidiot@text\n")
    cfg = ZFilterSettings(keep_features=[f"@{words}", "dolt@text,clod@text"])
    assert cfg.keep_features == ["idiot@text", "*moron*@text", "dolt@text", "clod@text"]
    assert StatsSettings(keep_features=f"@{words}").keep_features == ["idiot@text", "*moron*@text"]
    with pytest.raises(ConfigError, match=r"cannot read the pattern file .*missing\.txt"):
        ZFilterSettings(keep_features=[f"@{tmp_path / 'missing.txt'}"])
    nested = tmp_path / "nested.txt"
    nested.write_text("a@text\n@other.txt\n")
    with pytest.raises(ConfigError, match=r"nested\.txt:2: keep_features: .*another file"):
        ZFilterSettings(keep_features=[f"@{nested}"])
    assert expand_patterns([]) == [] and ZFilterSettings().keep_features == []
    result = z_filter(_rows(), keep_features=[f"@{words}"], **ONE_BY_ONE)
    assert [r.id for r in result.accepted] == ["1", "2", "3"]


def test_the_filter_matrix_leaves_kept_columns_out_of_every_batch() -> None:
    import scipy.sparse as sp

    from zdebias.stats.zfilter import z_filter_matrix

    # columns: 0 the task's word, 1 an artefact; every row of label 0 carries column 0
    m = sp.csr_matrix(np.array([[1, 0], [0, 0], [1, 1], [1, 0], [1, 1]], dtype=np.uint8))
    y = np.array([0, 1, 0, 0, 0])
    common = dict(top_k=1, batch_size=1, shuffle_seed=None)
    plain = z_filter_matrix(m, y, 2, **common)
    assert (plain.accepted.tolist(), plain.rejected.tolist()) == ([0, 1], [2, 3, 4])
    kept = z_filter_matrix(m, y, 2, keep=np.array([True, False]), **common)
    # column 1 first seen in row 2 (accepted); then it is B(0) and rejects row 4
    assert (kept.accepted.tolist(), kept.rejected.tolist()) == ([0, 1, 2, 3], [4])
    assert kept.rejected_by_features.tolist() == [1]
    with pytest.raises(ValueError, match="keep has shape"):
        z_filter_matrix(m, y, 2, keep=np.array([True]), **common)


def test_the_shortcut_split_does_not_let_a_kept_feature_vote() -> None:
    # training: idiot on 30 hate rows, never on neither; 30 neither rows carry nice
    train = [Record(f"h{i}", "hate", text="idiot") for i in range(30)]
    train += [Record(f"n{i}", "neither", text="nice") for i in range(30)]
    test = [Record("t1", "neither", text="idiot"), Record("t2", "hate", text="idiot")]
    common = dict(labels=LABELS, features=["unigrams"])
    plain = split_records(train, test, **common)
    assert [r.meta["shortcut"]["slice"] for r in plain.rows] == ["conflicting", "aligned"]
    kept = split_records(train, test, keep_features=["idiot@text"], **common)
    assert [r.meta["shortcut"]["slice"] for r in kept.rows] == ["free", "free"]
    assert kept.summary["n_significant"] == plain.summary["n_significant"] == 2
    assert kept.summary["kept_features"] == {
        "patterns": ["idiot@text"],
        "n_features": 1,
        "n_significant": 1,
        "unmatched": [],
    }
    assert "kept_features" not in plain.summary


def test_the_stats_report_marks_kept_features_and_counts_them() -> None:
    rows = [Record(f"h{i}", "hate", text="idiot yankees") for i in range(30)]
    rows += [Record(f"n{i}", "neither", text="nice") for i in range(30)]
    m = measure(rows, labels=LABELS, features=["unigrams"], keep_features=["idiot@text"])
    report = m.report
    marks = {r["feature"]: r.get("kept", False) for r in report["top"]["hate"]}
    assert marks == {"idiot@text": True, "yankees@text": False, "nice@text": False}
    assert report["n_significant"] == 3
    assert report["kept_features"]["n_significant"] == 1
    assert m.gardner_points(20)["kept"] == ["idiot@text"]
    assert "kept" not in measure(rows, labels=LABELS, features=["unigrams"]).gardner_points(20)
    from zdebias.report.text import stats_text

    text = stats_text(report, 3)
    assert "significant features: 3 (1 of them kept" in text
    assert "idiot@text (kept)" in text and "yankees@text (kept)" not in text


def test_keep_features_is_for_z_filtering_only(tmp_path: Path) -> None:
    from zdebias.stats.execution.operations import filter_file
    from zdebias.stats.execution.source import FileInput

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": r.text, "label": r.label}) + "\n" for r in _rows()))
    cfg = FilterSettings(method="cartography", dynamics="x", keep_features=["idiot@text"])
    with pytest.raises(ConfigError, match="--keep-features is for z-filtering"):
        filter_file(FileInput(str(data), None), tmp_path / "out", cfg)


def _toxic_file(tmp_path: Path) -> Path:
    data = tmp_path / "toxic.jsonl"
    rows = [{"text": r.text, "label": r.label} for r in _rows()]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def test_the_cli_keeps_features_on_stats_filter_and_shortcut_split(tmp_path: Path) -> None:
    from helpers.cli_main import run_main

    data = _toxic_file(tmp_path)
    common = ["--features", "unigrams", "--task", "labels:hate,neither"]
    order = ["--biased-k", "1", "--zfilter-batch-size", "1", "--no-shuffle"]
    out = tmp_path / "f"
    args = ["filter", data, *common, *order, "--keep-features", "idiot@text", "--out", out]
    assert run_main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n_kept"], summary["keep_features"]) == (3, ["idiot@text"])
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert [r["meta"]["rejected_by"] for r in rejected] == [["yankees@text"]]
    report = tmp_path / "s.json"
    args = ["stats", data, *common, "--keep-features", "idi*", "--json", "--out", report]
    assert run_main(args) == 0
    assert json.loads(report.read_text())["kept_features"]["n_features"] == 1
    split = tmp_path / "split"
    args = ["shortcut-split", "--train", data, "--test", data, *common]
    assert run_main([*args, "--keep-features", "idiot@text", "--out", split]) == 0
    assert json.loads((split / "summary.json").read_text())["keep_features"] == ["idiot@text"]
    missing = f"@{tmp_path / 'nope.txt'}"
    assert run_main(["filter", data, *common, "--keep-features", missing, "--out", out]) == 2


def test_the_python_api_takes_keep_features() -> None:
    rows = [{"id": r.id, "text": r.text, "label": r.label} for r in _rows()]
    common = dict(task="labels:hate,neither", features=["unigrams"])
    out, summary = zdebias.z_filter(
        rows,
        biased_k=1,
        zfilter_batch_size=1,
        shuffle=False,
        keep_features=["idiot@text"],
        return_summary=True,
        **common,
    )
    assert [r["keep"] for r in out] == [True, True, True, False]
    assert [r["rejected_by"] for r in out] == [[], [], [], ["yankees@text"]]
    assert summary["keep_features"] == ["idiot@text"]
    found = zdebias.find_shortcuts(rows, keep_features=["idiot@text"], **common)
    kept = found.table.set_index(["label", "feature"])["kept"]
    assert bool(kept["hate", "idiot@text"]) and not bool(kept["hate", "yankees@text"])
    assert "kept" not in zdebias.find_shortcuts(rows, **common).table.columns
    _split, summary = zdebias.shortcut_split(
        rows, rows, keep_features=["*"], return_summary=True, **common
    )
    assert summary["counts"]["free"] == 4  # every feature kept: nothing votes


def test_the_gardner_plot_and_the_report_name_kept_features(tmp_path: Path) -> None:
    from helpers.cli_main import run_main
    from zdebias.report.plots import gardner_files
    from zdebias.report.results import stats_context

    rows = [Record(f"h{i}", "hate", text="idiot yankees") for i in range(30)]
    rows += [Record(f"n{i}", "neither", text="nice") for i in range(30)]
    m = measure(rows, labels=LABELS, features=["unigrams"], keep_features=["idiot@text"])
    files = gardner_files(m, tmp_path / "g", z_c=m.report["z_critical"], min_n=0)
    html = Path(files["html"]).read_text()
    assert "idiot@text (kept)" in html and "yankees@text (kept)" not in html
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": r.text, "label": r.label}) + "\n" for r in rows))
    out = tmp_path / "s.json"
    common = ["--features", "unigrams", "--task", "labels:hate,neither", "--min-n", "0"]
    assert run_main(["stats", data, *common, "--keep-features", "idiot@text", "--out", out]) == 0
    shown = [row["feature"] for row in stats_context(out)["top"] if row["feature"]]
    assert "idiot@text (kept)" in shown and "yankees@text" in shown


def test_combine_keeps_features_and_warns_of_a_pattern_that_matches_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.cli_main import run_main

    data = _toxic_file(tmp_path)
    args = ["combine", "--original", data, "--generated", data, "--recipe", "par-z"]
    args += ["--features", "unigrams", "--task", "labels:hate,neither", "--biased-k", "1"]
    args += ["--zfilter-batch-size", "1", "--no-shuffle", "--out", tmp_path / "c"]
    assert run_main([*args, "--keep-features", "idiot@text,dolt@text"]) == 0
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["kept_features"]["unmatched"] == ["dolt@text"]
    assert "'dolt@text' matches no feature" in capsys.readouterr().err
    # Par-Z filters each copy as z_filter does: row 4 of each rejected by yankees
    assert summary["n_rejected"] == 2
