"""``zdebias report`` on every result: a filter folder, a combine folder, a stats JSON file.
The tables are parsed back from the HTML and checked against counts taken from the files;
in headless Chromium where it is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.demo import make_demo_corpus
from zdebias.data.readers import read_records
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.report.plots import gardner_plot, outliers
from zdebias.report.results import result_kind, write_result_report

FEATURES = "unigrams,hypo-len,lex-overlap,null"


class _Tables(HTMLParser):
    """Each ``<table id=...>`` as rows of cell texts (header row included)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._id: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._id = dict(attrs).get("id") or f"t{len(self.tables)}"
            self.tables[self._id] = []
        elif tag == "tr" and self._id:
            self.tables[self._id].append([])
        elif tag in ("td", "th") and self._id:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._id and self._cell is not None:
            self.tables[self._id][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._id = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def _run(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    splits = make_demo_corpus(seed=0, n_train=300, n_dev=60, n_test=90)
    write_records(splits["train"], root / "train.jsonl")
    write_records(splits["dev"], root / "dev.jsonl")
    options = ["--features", FEATURES, "--zfilter-batch-size", "60", "-q"]
    _run("filter", str(root / "train.jsonl"), "--out", str(root / "filtered"), *options)
    _run(
        "combine",
        "--original",
        str(root / "train.jsonl"),
        "--generated",
        str(root / "dev.jsonl"),
        "--recipe",
        "z-aug",
        "--out",
        str(root / "combined"),
        *options,
    )
    _run(
        "stats",
        str(root / "train.jsonl"),
        "--out",
        str(root / "stats.json"),
        "--features",
        FEATURES,
        "--track",
        "hypo-len<5",
        "-q",
    )
    return {
        "filter": root / "filtered",
        "combine": root / "combined",
        "stats": root / "stats.json",
        "root": root,
    }


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def test_filter_folder_report(folders: dict[str, Path]) -> None:
    folder = folders["filter"]
    assert result_kind(folder) == "filter"
    _run("report", str(folder))
    html = (folder / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("data:image/png;base64,") == 2
    t = tables(html)
    kept = read_records(folder / "kept.jsonl")
    rejected = read_records(folder / "rejected.jsonl")
    assert len(kept) + len(rejected) == 300
    labels = ["entailment", "neutral", "contradiction"]
    k, r = Counter(x.label for x in kept), Counter(x.label for x in rejected)
    rows = {row[0]: row[1:] for row in t["labels"][1:]}
    for label in labels:
        assert [_num(v) for v in rows[label][:3]] == [k[label] + r[label], k[label], r[label]]
    assert [_num(v) for v in rows["all"][:3]] == [300, len(kept), len(rejected)]
    # rejection reasons: counted from rejected.jsonl, most first
    reasons = Counter(f for x in rejected for f in x.meta["rejected_by"])
    table = [(row[1], _num(row[2])) for row in t["reasons"][1:]]
    assert table == sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[: len(table)]
    # before/after: the filter's own numbers (summary.json), z to one decimal
    summary = json.loads((folder / "summary.json").read_text())
    first = summary["top_before_after"]["entailment"][0]
    row = t["top"][1]
    assert row[1] == first["feature"] and row[2] == f"{first['z_before']:.1f}"
    assert _num(row[3]) == first["n_before"] and _num(row[7]) == first["n_after"]
    # examples: the first rejected row and its reasons
    assert t["rejected-examples"][1][0].split()[0] == rejected[0].id
    assert t["rejected-examples"][1][-1] == ", ".join(rejected[0].meta["rejected_by"])


def test_combine_folder_report(folders: dict[str, Path]) -> None:
    folder = folders["combine"]
    assert result_kind(folder) == "combine"
    path = write_result_report(folder)
    assert path == folder / "report.html"
    t = tables(path.read_text())
    combined = read_records(folder / "combined.jsonl")
    rejected = read_records(folder / "rejected.jsonl")
    kept_types = Counter(x.meta["type"] for x in combined)
    rej_types = Counter(x.meta["type"] for x in rejected)
    assert kept_types["original"] == 300  # Z-Aug keeps D0 whole
    assert {row[0]: (_num(row[1]), _num(row[2])) for row in t["types"][1:]} == {
        ty: (kept_types[ty], rej_types[ty]) for ty in set(kept_types) | set(rej_types)
    }


def test_stats_file_report(folders: dict[str, Path], tmp_path: Path) -> None:
    stats = json.loads(folders["stats"].read_text())
    assert result_kind(folders["stats"]) == "stats"
    out = write_result_report(folders["stats"], tmp_path / "s.html")
    html = out.read_text()
    assert html.count("data:image/png;base64,") == 1
    t = tables(html)
    top = stats["top"]["entailment"][0]
    assert t["top"][1][1:4] == [top["feature"], f"{top['z']:.1f}", f"{top['n']:,}"]
    tracked = {row[1]: row[2] for row in t["tracked"][1:]}
    assert tracked["neutral"] == f"{stats['tracked']['hypo-len<5']['neutral']['z']:.1f}"
    assert {row[0]: _num(row[1]) for row in t["labels"][1:]} == stats["label_counts"]


def test_report_refuses_other_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a report input; expected a run folder"):
        result_kind(tmp_path)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a zdebias stats JSON"):
        result_kind(tmp_path / "x.json")


def test_gardner_plot_returns_figures_with_named_outliers() -> None:
    names = ["common", "nobody", "rare", "weak"]
    # n and p̂ per feature for 3 labels; z from them (p0 = 1/3)
    n = np.array([1000, 80, 25, 500])
    p = np.array([[0.40, 0.30, 0.30], [0.0, 0.0, 1.0], [0.2, 0.2, 0.6], [0.36, 0.32, 0.32]])
    z = (p - 1 / 3) / np.sqrt((1 / 3) * (2 / 3) / n[:, None])
    fig = gardner_plot(names, ["e", "n", "c"], z, n, p, z_c=4.0, min_n=20, label_top=2)
    # above the curve: common (z 4.47) and nobody (z 12.6); rare (z 2.83) and weak are not;
    # nobody lies furthest above the curve, so it is named first
    assert [t.get_text() for t in fig.axes[0].texts] == ["nobody", "common"]
    from zdebias.report.plots import gardner_points

    pts = gardner_points(z, n, p, min_n=20)
    assert pts["feature"][outliers(pts, 4.0, 3, 1)].tolist() == [1]
    plotly_fig = gardner_plot(
        names, ["e", "n", "c"], z, n, p, z_c=4.0, min_n=20, label_top=1, backend="plotly"
    )
    named = [tr for tr in plotly_fig.data if tr.name == "strongest"]
    assert list(named[0].text) == ["nobody"]
    with pytest.raises(ConfigError, match="unknown plot backend"):
        gardner_plot(names, ["e", "n", "c"], z, n, p, z_c=4.0, backend="svg")  # type: ignore[arg-type]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.skipif(_chromium() is None, reason="no Chromium on this machine")
def test_filter_report_in_headless_chromium(folders: dict[str, Path]) -> None:
    folder = folders["filter"]
    path = write_result_report(folder)
    proc = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    t = tables(proc.stdout)
    kept = read_records(folder / "kept.jsonl")
    rows = {row[0]: row[1:] for row in t["labels"][1:]}
    assert _num(rows["all"][1]) == len(kept)
    assert "data:image/png;base64," in proc.stdout


def test_run_report_tracks_features_on_any_data(folders: dict[str, Path]) -> None:
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    track = ["sleeping@hypothesis", "tall@hypothesis"]
    features = ["unigrams", "null"]
    recipe = recipe_from_dict(
        {
            "name": "tracked",
            "data": {"train": str(folders["root"] / "train.jsonl")},
            "stages": {
                "before": {
                    "stage": "stats",
                    "input": "train",
                    "features": features,
                    "track": track,
                },
                "zf": {"stage": "filter", "input": "train", "features": features},
                "after": {"stage": "stats", "input": "zf", "features": features, "track": track},
            },
        }
    )
    run = folders["root"] / "run"
    run_recipe(recipe, run, progress=False)
    _run("report", str(run))
    t = tables((run / "report.html").read_text())
    tracked = next(rows for rows in t.values() if rows and rows[0][0] == "tracked feature")
    before = json.loads((run / "before" / "stats.json").read_text())["tracked"]
    after = json.loads((run / "after" / "stats.json").read_text())["tracked"]
    for row in tracked[1:]:
        feature, label = row[0], row[1]
        assert label == max(before[feature], key=lambda lab: before[feature][lab]["z"])
        assert row[3] == f"{before[feature][label]['z']:.1f}"
        assert row[6] == f"{after[feature][label]['z']:.1f}"
    assert [row[0] for row in tracked[1:]] == track


def test_report_out_file_is_not_overwritten_without_the_flag(folders: dict[str, Path]) -> None:
    target = folders["root"] / "mine.txt"
    target.write_text("a file of the user's\n")
    result = CliRunner().invoke(app, ["report", str(folders["stats"]), "--out", str(target)])
    assert isinstance(result.exception, ConfigError)  # the CLI's main: exit 2, one line
    assert "exists and is not empty; pass --overwrite" in str(result.exception)
    assert target.read_text() == "a file of the user's\n"
    _run("report", str(folders["stats"]), "--out", str(target), "--overwrite")
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_report_shows_the_settings_by_their_option_names(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    from zdebias.report.results import folder_context

    expected = {
        "biased_k": 20,
        "zfilter_batch_size": 60,
        "shuffle": True,
        "seed": 0,
        "min_z": 0.0,
        "features": FEATURES.split(","),
    }
    assert json.loads(folder_context(folders["filter"], "filter")["settings"]) == expected
    # a folder that zdebias 0.2 wrote: its summary's old names are read as today's
    old = tmp_path / "old"
    shutil.copytree(folders["filter"], old)
    summary = json.loads((old / "summary.json").read_text())
    for new, was in (("biased_k", "top_k"), ("zfilter_batch_size", "batch_size")):
        summary[was] = summary.pop(new)
    summary["shuffle_seed"] = summary.pop("seed")
    del summary["shuffle"]
    (old / "summary.json").write_text(json.dumps(summary))
    assert json.loads(folder_context(old, "filter")["settings"]) == expected
