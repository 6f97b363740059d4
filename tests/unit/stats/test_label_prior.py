"""The label prior of docs/design.md §14: z against each label's share instead of 1/L, by hand."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from zdebias.data.schema import Record
from zdebias.stats.settings import StatsSettings, ZFilterSettings
from zdebias.stats.zfilter import z_filter, z_filter_matrix
from zdebias.stats.zstats import (
    imbalance_line,
    prior_p0,
    z_from_counts,
    z_statistics,
)


def _skewed() -> tuple[sp.csr_matrix, np.ndarray]:
    """100 rows, 80 of label 0 and 20 of label 1. Feature 0 on 10 rows (8 of label 0),
    feature 1 on 5 rows (all label 1), feature 2 (<null>) on every row."""
    y = np.array([0] * 80 + [1] * 20)
    m = np.zeros((100, 3), dtype=np.uint8)
    m[:8, 0] = 1
    m[80:82, 0] = 1
    m[82:87, 1] = 1
    m[:, 2] = 1
    return sp.csr_matrix(m), y


def test_z_against_the_label_shares_by_hand() -> None:
    m, y = _skewed()
    z_u, n, p = z_statistics(m, y, 2)
    z_e, n_e, p_e = z_statistics(m, y, 2, label_prior="empirical")
    assert n.tolist() == n_e.tolist() == [10, 5, 100]
    assert np.array_equal(p, p_e)
    # uniform: (0.8 - 0.5) / sqrt(0.25 / 10)
    assert z_u[0, 0] == pytest.approx(0.3 / math.sqrt(0.025))  # 1.897
    # empirical: p̂ equals the share, so z = 0 for both labels
    assert z_e[0].tolist() == pytest.approx([0.0, 0.0])
    # all 5 rows of feature 1 are label 1: the normal approximation would say
    # (1 - 0.2) / sqrt(0.2 * 0.8 / 5) = 4.472, but 5 rows expect 5 * 0.2 = 1 < 5 of label 1
    # (share 0.2 < 1/L), so z is the exact tail's: P(X >= 5) = 0.2^5, z = Φ⁻¹(1 - 0.00032)
    assert z_e[1, 1] == pytest.approx(NormalDist().inv_cdf(1 - 0.2**5))  # 3.414
    assert z_e[1, 1] < 0.8 / math.sqrt(0.032)
    assert z_u[1, 1] == pytest.approx(0.5 / math.sqrt(0.05))  # 2.236
    # <null> is the label imbalance under 1/L, and nothing under the label shares
    assert z_u[2, 0] == pytest.approx(0.3 / math.sqrt(0.0025))  # 6.0
    assert z_e[2].tolist() == pytest.approx([0.0, 0.0])


def test_prior_p0_and_uniform_unchanged() -> None:
    assert prior_p0([80, 20], "empirical").tolist() == [0.8, 0.2]
    assert prior_p0([80, 20], "uniform") is None and prior_p0([80, 20]) is None
    counts = np.array([[8, 2], [0, 5]])
    # uniform via p0 = [1/L ...] gives the same numbers as no prior
    assert np.allclose(z_from_counts(counts, np.array([0.5, 0.5]))[0], z_from_counts(counts)[0])
    with pytest.raises(Exception, match="label_prior must be one of"):
        prior_p0([1, 1], "balanced")


def _records(labels: list[str], words: list[str]) -> list[Record]:
    return [
        Record(id=str(i), text=w, label=lab)
        for i, (lab, w) in enumerate(zip(labels, words, strict=True))
    ]


def test_stats_report_names_the_prior_and_counts_what_only_reflects_the_shares() -> None:
    from zdebias.stats.measure import measure

    # 80 positive, 20 negative; "good" on 40 positive rows, "bad" on 10 negative rows, "film"
    # on every row: under 1/L <null>, "film" and "good" favour positive
    labels = ["positive"] * 80 + ["negative"] * 20
    words = ["good film"] * 40 + ["nice film"] * 40 + ["bad film"] * 10 + ["dull film"] * 10
    records = _records(labels, words)
    cfg = dict(features=["unigrams", "null"], task="sentiment")
    uniform = measure(
        records,
        StatsSettings(**{k: v for k, v in cfg.items() if k != "task"}),
        labels=("negative", "positive"),
    ).report
    assert uniform["label_prior"] == "uniform"
    info = uniform["imbalance"]
    assert info["label_shares"] == {"negative": 0.2, "positive": 0.8}
    # 6 features (<null>, film, good, nice, bad, dull): z_c at α .01 / 6 = 3.14.
    # Under 1/L: <null> and film z 6.0 (positive); good, nice (p̂ 1, n 40) 0.5/sqrt(0.25/40)
    # = 6.32; bad, dull (p̂ 1, n 10) 0.5/sqrt(0.25/10) = 3.16: all 6 significant.
    # Under the shares: <null>, film 0; good, nice 0.2/sqrt(0.16/40) = 3.16; bad, dull
    # 0.8/sqrt(0.16/10) = 6.32: 4 significant, so 2 only reflect the label shares
    assert info["n_significant_uniform"] == 6
    assert info["n_significant_empirical"] == 4
    assert info["n_only_label_shares"] == 2
    assert imbalance_line(info) == (
        "labels are imbalanced (negative 20%, positive 80%): 2 of 6 significant features only "
        "reflect the label shares (z against 1/L); --label-prior empirical tests against each "
        "label's share instead"
    )
    empirical = measure(
        records,
        StatsSettings(features=["unigrams", "null"], label_prior="empirical"),
        labels=("negative", "positive"),
    ).report
    assert empirical["label_prior"] == "empirical"
    assert empirical["p0"] == {"negative": 0.2, "positive": 0.8}
    assert "imbalance" not in empirical
    assert empirical["n_significant"] == 4
    top_neg = empirical["top"]["negative"][0]
    # bad, dull: 10 rows expect 10 * 0.2 = 2 < 5 negative ones, so the exact tail decides:
    # P(X >= 10) = 0.2^10, z 5.195 (the normal approximation's 6.32), still significant
    assert top_neg["z"] == pytest.approx(NormalDist().inv_cdf(1 - 0.2**10))
    assert empirical["exact_test"]["per_label"] == {"negative": 2, "positive": 0}


def test_balanced_labels_give_no_imbalance_and_the_same_z() -> None:
    from zdebias.stats.measure import measure

    records = _records(["positive", "negative"] * 20, ["good film", "bad film"] * 20)
    cfg = StatsSettings(features=["unigrams", "null"])
    a = measure(records, cfg, labels=("negative", "positive")).report
    b = measure(
        records,
        cfg.model_copy(update={"label_prior": "empirical"}),
        labels=("negative", "positive"),
    ).report
    assert a["imbalance"] is None
    assert a["top"] == b["top"] and a["n_significant"] == b["n_significant"]


def test_z_filter_keeps_the_label_shares_with_the_empirical_prior() -> None:
    # only <null>: under 1/L every batch's majority label is biased, so the filter
    # rebalances; against the shares it keeps them
    rng = np.random.default_rng(0)
    y = rng.permutation(np.array([0] * 300 + [1] * 100))
    m = sp.csr_matrix(np.ones((400, 1), dtype=np.uint8))
    uniform = z_filter_matrix(m, y, 2, batch_size=20, shuffle_seed=0)
    empirical = z_filter_matrix(m, y, 2, batch_size=20, shuffle_seed=0, label_prior="empirical")
    share = lambda rows: float((y[rows] == 0).mean())  # noqa: E731
    assert abs(share(uniform.accepted) - 0.5) < 0.05
    assert abs(share(empirical.accepted) - 0.75) < 0.05
    assert len(empirical.accepted) > len(uniform.accepted)


def test_z_filter_records_the_prior_and_warns_when_imbalanced() -> None:
    labels = ["positive"] * 80 + ["negative"] * 20
    words = ["good film"] * 40 + ["nice film"] * 40 + ["bad film"] * 10 + ["dull film"] * 10
    records = _records(labels, words)
    base = ZFilterSettings(features=["unigrams", "null"], biased_k=2)
    plain = z_filter(records, base, labels=("negative", "positive"))
    assert plain.summary["label_prior"] == "uniform"
    assert plain.summary["imbalance"]["n_only_label_shares"] == 2
    assert any("labels are imbalanced" in w for w in plain.summary["warnings"])
    chosen = z_filter(records, base, labels=("negative", "positive"), label_prior="empirical")
    assert chosen.summary["label_prior"] == "empirical"
    assert "imbalance" not in chosen.summary
    assert len(chosen.kept) + len(chosen.rejected) == 100


def _imbalanced_snli(data_dir: Path) -> list[Record]:
    """The first 6,600 neutral, 2,750 entailment and 1,650 contradiction pairs of snli_20k
    train, in file order: 60 / 25 / 15 %, as SICK-like data is."""
    from zdebias.data.readers import read_records

    want = {"neutral": 6600, "entailment": 2750, "contradiction": 1650}
    out = []
    for r in read_records(data_dir / "snli_20k" / "train.jsonl"):
        if want[r.label]:
            want[r.label] -= 1
            out.append(r)
    return out


def test_real_imbalanced_snli_shortcuts_stay_and_the_label_shares_go(data_dir: Path) -> None:
    from zdebias.stats.measure import measure

    records = _imbalanced_snli(data_dir)
    assert len(records) == 11_000
    labels = ("entailment", "neutral", "contradiction")
    cfg = StatsSettings(features=["ngrams", "lex-overlap", "null"])
    plain = measure(records, cfg, labels=labels)
    shares = measure(records, cfg.model_copy(update={"label_prior": "empirical"}), labels=labels)
    z_c = shares.report["z_critical"]
    assert plain.report["z_critical"] == z_c

    def z(m: Any, feature: str, label: str) -> float:
        return float(m.z[m.names.index(feature), labels.index(label)])

    # under 1/L <null> and function words "give away" neutral ...
    assert z(plain, "<null>", "neutral") == pytest.approx((0.6 - 1 / 3) / math.sqrt(2 / 9 / 11_000))
    assert z(plain, "a@hypothesis", "neutral") > z_c
    assert plain.report["imbalance"]["n_only_label_shares"] > 0.9 * plain.report["n_significant"]
    # ... against the label shares they do not, and the real shortcuts stay significant
    assert max(z(shares, "<null>", lab) for lab in labels) == pytest.approx(0.0, abs=1e-9)
    assert max(z(shares, "a@hypothesis", lab) for lab in labels) < z_c
    assert z(shares, "nobody@hypothesis", "contradiction") > z_c
    assert z(shares, "sleeping@hypothesis", "contradiction") > z_c
    assert z(shares, "full-lex-overlap", "entailment") > z_c
    assert shares.report["n_significant"] < plain.report["n_significant"] / 4


def test_real_imbalanced_snli_filter_keeps_the_label_shares(data_dir: Path) -> None:
    records = _imbalanced_snli(data_dir)
    cfg = ZFilterSettings(features=["ngrams", "lex-overlap", "null"])
    plain = z_filter(records, cfg)
    shares = z_filter(records, cfg, label_prior="empirical")
    for result, expected in ((plain, None), (shares, (0.25, 0.60, 0.15))):
        kept = result.summary["label_counts_after"]
        total = sum(kept.values())
        got = [kept[lab] / total for lab in ("entailment", "neutral", "contradiction")]
        if expected is None:  # against 1/L the filter rebalances: neutral far below 60 %
            assert got[1] < 0.45
        else:
            assert got == pytest.approx(expected, abs=0.03)
    assert len(shares.kept) > len(plain.kept)


def test_the_cli_takes_label_prior_on_stats_filter_and_combine(tmp_path: Path) -> None:
    import json

    from helpers.cli_main import run_main

    labels = ["positive"] * 80 + ["negative"] * 20
    words = ["good film"] * 40 + ["nice film"] * 40 + ["bad film"] * 10 + ["dull film"] * 10
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": w, "label": lab}) + "\n"
            for lab, w in zip(labels, words, strict=True)
        )
    )
    feats = ["--features", "unigrams,null", "--task", "sentiment"]
    out = tmp_path / "s.json"
    assert (
        run_main(["stats", data, *feats, "--label-prior", "empirical", "--json", "--out", out]) == 0
    )
    report = json.loads(out.read_text())
    assert (report["label_prior"], report["n_significant"]) == ("empirical", 4)
    assert (
        run_main(["filter", data, *feats, "--label-prior", "empirical", "--out", tmp_path / "f"])
        == 0
    )
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert summary["label_prior"] == "empirical"
    assert (
        run_main(
            [
                "combine",
                "--original",
                data,
                "--generated",
                data,
                "--recipe",
                "z-aug",
                *feats,
                "--label-prior",
                "empirical",
                "--out",
                tmp_path / "c",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["label_prior"] == "empirical"
    assert run_main(["stats", data, *feats, "--label-prior", "balanced"]) == 2


def test_gardner_plot_draws_one_curve_per_label_against_its_share() -> None:
    from zdebias.report.plots import gardner_plot, outliers, prior_of

    report = {"label_prior": "empirical", "labels": ["x", "y"], "p0": {"x": 0.8, "y": 0.2}}
    assert prior_of(report) == [0.8, 0.2]
    assert prior_of({**report, "label_prior": "uniform"}) is None
    z = np.array([[6.0, -6.0], [-1.0, 5.0]])
    n = np.array([100, 50])
    p = np.array([[0.95, 0.05], [0.4, 0.6]])
    uniform = gardner_plot(["a", "b"], ["x", "y"], z, n, p, z_c=3.0, min_n=10)
    shares = gardner_plot(["a", "b"], ["x", "y"], z, n, p, z_c=3.0, min_n=10, p0=[0.8, 0.2])
    assert len(uniform.axes[0].lines) == 2  # the curve and p0 = 1/2
    assert len(shares.axes[0].lines) == 4  # a curve and a p0 line per label
    assert [round(line.get_ydata()[0], 2) for line in shares.axes[0].lines[1::2]] == [0.8, 0.2]
    pts = {
        "feature": np.array([0, 1]),
        "label": np.array([0, 1]),
        "n": n,
        "p": np.array([0.95, 0.6]),
        "z": np.array([6.0, 5.0]),
    }
    # against 1/2 "a" lies further above the curve; against its share of 0.8, "b" does
    assert outliers(pts, 3.0, 2, 1).tolist() == [0]
    assert outliers(pts, 3.0, 2, 1, p0=[0.8, 0.2]).tolist() == [1]


def test_the_report_of_an_imbalanced_stats_file_says_so(tmp_path: Path) -> None:
    import json

    from helpers.cli_main import run_main
    from zdebias.report.results import build_result_report

    labels = ["positive"] * 80 + ["negative"] * 20
    words = ["good film"] * 40 + ["nice film"] * 40 + ["bad film"] * 10 + ["dull film"] * 10
    data = tmp_path / "d.jsonl"
    rows = zip(labels, words, strict=True)
    data.write_text("".join(json.dumps({"text": w, "label": lab}) + "\n" for lab, w in rows))
    out = tmp_path / "s.json"
    args = ["stats", data, "--features", "unigrams,null", "--task", "sentiment", "--json"]
    assert run_main([*args, "--min-n", "0", "--out", out]) == 0
    page = build_result_report(out)
    assert "2 of 6 significant features only reflect the label shares" in page
