"""On real SNLI (snli_20k train): the known artifacts are found and z-filtering removes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zdebias.data.labels import label_ids
from zdebias.data.readers import read_records
from zdebias.stats.zfilter import z_filter
from zdebias.stats.zstats import describe, z_from_counts, z_statistics

pytestmark = pytest.mark.real_data
LABELS = ("entailment", "neutral", "contradiction")


@pytest.fixture(scope="module")
def snli(data_dir: Path):
    return read_records(data_dir / "snli_20k" / "train.jsonl")


def test_known_artifacts_are_reported(snli) -> None:
    report = describe(
        snli, features=["ngrams", "hypo-len", "len-ratio", "lex-overlap", "null"], top=20
    )
    assert report["n_examples"] == 19_993
    assert report["label_counts"] == {"entailment": 6671, "neutral": 6663, "contradiction": 6659}
    ent = {r["feature"]: r for r in report["top"]["entailment"]}
    con = {r["feature"]: r for r in report["top"]["contradiction"]}
    neu = {r["feature"]: r for r in report["top"]["neutral"]}
    # lexical overlap -> entailment: z 30-37 (data README), the strongest artifacts
    assert report["top"]["entailment"][0]["feature"] == "lex-overlap>0.7"
    assert ent["lex-overlap>0.7"]["z"] == pytest.approx(36.88, abs=0.01)
    assert ent["lex-overlap>0.7"]["n"] == 3736
    assert ent["full-lex-overlap"]["z"] == pytest.approx(33.06, abs=0.01)
    assert ent["full-lex-overlap"]["n"] == 622
    assert ent["outside@hypothesis"]["z"] == pytest.approx(19.61, abs=0.01)
    # sleeping -> contradiction: z ≈ 18
    assert report["top"]["contradiction"][0]["feature"] == "sleeping@hypothesis"
    assert con["sleeping@hypothesis"]["z"] == pytest.approx(18.26, abs=0.01)
    assert (con["sleeping@hypothesis"]["n"], con["sleeping@hypothesis"]["p"]) == (
        276,
        pytest.approx(235 / 276, abs=1e-9),
    )
    assert neu["to@hypothesis"]["z"] == pytest.approx(24.59, abs=0.01)
    assert report["z_critical"] == pytest.approx(5.2195, abs=1e-3)
    assert report["n_significant"] == 199


def test_filtering_removes_them(snli) -> None:
    result = z_filter(snli)  # default features (incl. hypothesis-only), k = 20, batch 1000
    s = result.summary
    assert s["n_kept"] + s["n_rejected"] == 19_993
    assert len({r.id for r in result.kept} | {r.id for r in result.rejected}) == 19_993
    fm = result.features
    z_before, _, _ = z_statistics(fm.matrix, label_ids(snli, LABELS), 3)
    z_after, n_after, _ = z_from_counts(result.arrays.counts)
    for name, label in [
        ("lex-overlap>0.7", 0),
        ("lex-overlap>0.8", 0),
        ("full-lex-overlap", 0),
        ("sleeping@hypothesis", 2),
        ("is sleeping@hypothesis", 2),
        ("to@hypothesis", 1),
        ("outside@hypothesis", 0),
    ]:
        j = fm.index[name]
        assert z_before[j, label] > 13
        # from 13-37 to about the significance threshold (5.2) or below
        assert z_after[j, label] < min(6.0, z_before[j, label] / 3), name
    assert s["n_significant_before"] > 190
    assert s["n_significant_after"] <= 3  # from 199+ (the order of ties moves it by a few)
    assert min(r["z"] for r in s["top_z_before"].values()) > 40  # hypo-only-pred=...
    assert max(r["z"] for r in s["top_z_after"].values()) < 8
    assert np.all(n_after >= 0)
    sleeping = [r for r in result.rejected if "sleeping@hypothesis" in r.meta["rejected_by"]]
    assert sleeping and all(r.label == "contradiction" for r in sleeping)


def test_recipes_filter_the_original_part_as_z_filter_does(data_dir: Path) -> None:
    # SNLI test stands in for generated data: its n-grams must not change Z(dev) in Seq-Z/Par-Z
    from zdebias.stats.recipes import par_z, seq_z

    dev = read_records(data_dir / "snli_20k" / "dev.jsonl")
    test = read_records(data_dir / "snli_20k" / "test.jsonl")
    alone = [r.id for r in z_filter(dev).accepted]  # batches of 120, scaled to 2,399 rows
    assert len(dev) == 2_399 and len(test) == 4_801 and len(alone) == 1_374
    for recipe in (seq_z, par_z):
        res = recipe(dev, test)
        assert [r.id for r in res.records if r.meta["type"] == "original"] == alone
    assert len(res.records) == 1_374 + 2_328  # par-z: each part filtered on its own
    assert [s["zfilter_batch_size"] for s in res.summary["stages"]] == [120, 241]
