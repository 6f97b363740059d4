"""Z-Aug, Par-Z, Seq-Z: tagging, nothing lost, each equal to its definition."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.features.extract import extract_features
from zdebias.stats.recipes import combine, par_z, seq_z, z_aug
from zdebias.stats.zfilter import z_filter, z_filter_matrix

LABELS = ("entailment", "neutral", "contradiction")
FEATURES = ["unigrams", "null"]
OPTS = {"features": FEATURES, "batch_size": 40, "top_k": 5}


def _data(seed: int, n: int, prefix: str, plant_rate: float) -> list[Record]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    out = []
    for i in range(n):
        label = LABELS[int(rng.integers(0, 3))]
        hyp = " ".join(rng.choice(words, size=3))
        if label == "contradiction" and rng.random() < plant_rate:
            hyp += " nobody"
        out.append(Record(f"{prefix}{i}", label, "a premise", hyp, meta={"source": prefix}))
    return out


ORIG = _data(0, 240, "o", 0.5)
GEN = _data(1, 300, "g", 0.3)


def _ids(records: list[Record]) -> list[str]:
    return [r.id for r in records]


def _check_partition(result) -> None:
    ids = _ids(result.records) + _ids(result.rejected)
    assert sorted(ids) == sorted(_ids(ORIG) + _ids(GEN))
    for r in result.records + result.rejected:
        assert r.meta["type"] == ("original" if r.id.startswith("o") else "generated")
        assert r.meta["source"] == r.id[0]
    assert all(r.meta["rejected_by"] for r in result.rejected)
    assert all("type" not in r.meta for r in ORIG + GEN)  # inputs untouched


def _reference(rows_sets):
    """Filter with the same feature matrix the recipes build (hypo-only aside)."""
    fm = extract_features(ORIG + GEN, FEATURES, labels=LABELS)
    y = np.array([LABELS.index(r.label) for r in ORIG + GEN])
    return fm, y


def test_z_aug_keeps_original_whole_and_filters_generated() -> None:
    res = z_aug(ORIG, GEN, **OPTS)
    _check_partition(res)
    assert _ids(res.records[: len(ORIG)]) == _ids(ORIG)
    fm, y = _reference(None)
    n = len(ORIG)
    ref = z_filter_matrix(
        fm.matrix,
        y,
        3,
        rows=np.arange(n, n + len(GEN)),
        seed_rows=np.arange(n),
        top_k=5,
        batch_size=40,
    )
    assert _ids(res.records[n:]) == [GEN[i - n].id for i in ref.accepted.tolist()]
    s = res.summary
    assert (s["recipe"], s["n_original"], s["n_generated"]) == ("z-aug", 240, 300)
    assert s["n_output_original"] == 240 and s["n_rejected_original"] == 0
    assert s["n_output"] + s["n_rejected"] == 540


def test_par_z_filters_each_part_on_its_own() -> None:
    res = par_z(ORIG, GEN, **OPTS)
    _check_partition(res)
    fm, y = _reference(None)
    n = len(ORIG)
    a = z_filter_matrix(fm.matrix, y, 3, rows=np.arange(n), top_k=5, batch_size=40)
    b = z_filter_matrix(fm.matrix, y, 3, rows=np.arange(n, n + len(GEN)), top_k=5, batch_size=40)
    everything = ORIG + GEN
    expected = [everything[i].id for i in np.concatenate([a.accepted, b.accepted]).tolist()]
    assert _ids(res.records) == expected
    assert [st["stage"] for st in res.summary["stages"]] == ["Z(original)", "Z(generated)"]


def test_seq_z_seeds_generated_with_filtered_original() -> None:
    res = seq_z(ORIG, GEN, **OPTS)
    _check_partition(res)
    fm, y = _reference(None)
    n = len(ORIG)
    a = z_filter_matrix(fm.matrix, y, 3, rows=np.arange(n), top_k=5, batch_size=40)
    b = z_filter_matrix(
        fm.matrix,
        y,
        3,
        rows=np.arange(n, n + len(GEN)),
        seed_rows=a.accepted,
        top_k=5,
        batch_size=40,
    )
    everything = ORIG + GEN
    expected = [everything[i].id for i in np.concatenate([a.accepted, b.accepted]).tolist()]
    assert _ids(res.records) == expected
    stages = res.summary["stages"]
    assert stages[1]["n_seed"] == len(a.accepted) == stages[0]["n_accepted"]
    # filtering reduces the planted 'nobody' artifact in the output
    s = res.summary
    assert s["top_z_output"]["contradiction"]["z"] < s["top_z_original"]["contradiction"]["z"]


def test_combine_dispatch_and_unknown_recipe() -> None:
    a = combine("Seq_Z", ORIG, GEN, **OPTS)
    b = seq_z(ORIG, GEN, **OPTS)
    assert _ids(a.records) == _ids(b.records)
    with pytest.raises(ConfigError, match="z-aug, par-z, seq-z"):
        combine("mix", ORIG, GEN)


def test_default_features_train_hypothesis_only_on_original() -> None:
    # Original hypotheses give the label away by a word; generated ones use other words. A
    # hypothesis-only model trained on the original data only cannot know the generated words.
    orig = [
        Record(f"o{i}", LABELS[i % 3], "p", ["yes", "maybe", "no"][i % 3] + " x") for i in range(90)
    ]
    gen = [Record(f"g{i}", LABELS[i % 3], "p", f"other{i % 3} y") for i in range(30)]
    res = z_aug(orig, gen, features=["hypo-only"], batch_size=10)
    assert res.summary["n_output_original"] == 90
    assert res.summary["top_z_original"]["entailment"]["feature"] == "hypo-only-pred=entailment"
    assert res.summary["top_z_original"]["entailment"]["z"] == pytest.approx(
        (1 - 1 / 3) / np.sqrt((1 / 3) * (2 / 3) / 30), abs=1e-9
    )
    # generated words are unknown to a model fit on the original data: every generated record
    # gets the same prediction, so the feature carries no label information there (z = 0);
    # a model fit on all data would have learned them (z = 4.47 per label).
    for row in res.summary["top_z_generated"].values():
        assert row["z"] == pytest.approx(0.0, abs=1e-9) and row["n"] == 30


def test_seq_z_filters_the_original_as_z_filter_alone_does() -> None:
    # Generated hypotheses bring n-grams the original data never has. With the default features
    # (hypothesis-only prediction included), Z(D0) inside Seq-Z must be the very Z(D0) that
    # `zdebias filter` gives: the generated rows must not shift the original rows' features.
    words = [" ".join(f"x{(7 * i + j) % 97}" for j in range(6)) for i in range(len(GEN))]
    gen = [
        Record(r.id, r.label, r.premise, h, meta=r.meta) for r, h in zip(GEN, words, strict=True)
    ]
    alone = z_filter(ORIG, top_k=5, batch_size=40, labels=LABELS)
    res = seq_z(ORIG, gen, top_k=5, batch_size=40, labels=LABELS)
    kept_original = [r.id for r in res.records if r.meta["type"] == "original"]
    assert kept_original == _ids(alone.accepted)
    assert 0 < len(kept_original) < len(ORIG)


def test_conditional_filter_fits_hypothesis_only_on_the_seed_as_z_aug_does() -> None:
    # The same data as test_default_features_train_hypothesis_only_on_original: seed (original)
    # hypotheses give the label away by a word, generated ones use words the seed never has.
    orig = [
        Record(f"o{i}", LABELS[i % 3], "p", ["yes", "maybe", "no"][i % 3] + " x") for i in range(90)
    ]
    gen = [Record(f"g{i}", LABELS[i % 3], "p", f"other{i % 3} y") for i in range(30)]
    cond = z_filter(gen, seed_records=orig, features=["hypo-only"], batch_size=10, labels=LABELS)
    res = z_aug(orig, gen, features=["hypo-only"], batch_size=10, labels=LABELS)
    # fit on the seed alone: every generated record gets one prediction (z = 0 on them), and
    # the conditional filter accepts exactly the generated records Z-Aug adds
    preds = cond.features.matrix[len(orig) :].toarray()
    assert (preds == preds[0]).all()
    assert _ids(cond.accepted) == [r.id for r in res.records if r.meta["type"] == "generated"]


# issue 27: combine of two inputs of the same file name (two folders' kept.jsonl, ids
# FILE:LINE from the reader) repeated ids in combined.jsonl (seq-z: 390 records, 266 ids)


def test_ids_repeated_across_and_within_inputs_are_made_unique_by_source() -> None:
    orig = [r.replace(id=f"kept.jsonl:{i % 200}") for i, r in enumerate(ORIG)]  # 40 repeats
    gen = [r.replace(id=f"kept.jsonl:{i}") for i, r in enumerate(GEN)]
    gen[-1] = gen[-1].replace(id="kept.jsonl:0@generated")  # a rename takes no id in use
    res = seq_z(orig, gen, **OPTS)
    out = res.records + res.rejected
    assert len(out) == len(ORIG) + len(GEN)
    assert len({r.id for r in out}) == len(out)
    by_input = {(r.meta["type"], r.meta.get("input_id", r.id)) for r in out}
    assert len(by_input) == 200 + len(GEN)  # every record traceable to its input id
    renamed = {r.id: r.meta["input_id"] for r in out if "input_id" in r.meta}
    assert len(renamed) == res.summary["n_ids_renamed"] == 40 + 200
    assert renamed["kept.jsonl:5@original"] == "kept.jsonl:5"  # the 2nd use within D0
    assert renamed["kept.jsonl:5@generated"] == "kept.jsonl:5"
    assert renamed["kept.jsonl:0@generated-2"] == "kept.jsonl:0"
    first = {r.id: r for r in out if r.meta["type"] == "original"}
    assert first["kept.jsonl:5"].premise == orig[5].premise  # the first use keeps its id
    again = seq_z(orig, gen, **OPTS)
    assert [r.id for r in again.records] == [r.id for r in res.records]  # deterministic


def test_combine_command_of_two_kept_jsonl_gives_distinct_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.cli_main import run_main

    for folder, records in (("a", ORIG), ("b", GEN)):
        (tmp_path / folder).mkdir()
        rows = [{k: v for k, v in r.to_dict().items() if k != "id"} for r in records]
        (tmp_path / folder / "kept.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    args = ["--original", str(tmp_path / "a/kept.jsonl"), "--generated"]
    args += [str(tmp_path / "b/kept.jsonl"), "--out", str(tmp_path / "c"), "--recipe", "seq-z"]
    code = run_main(
        ["-q", "combine", *args, "--features", "unigrams", "--zfilter-batch-size", "40"]
    )
    assert code == 0, capsys.readouterr().err
    out = []
    for name in ("combined.jsonl", "rejected.jsonl"):
        out += [json.loads(x) for x in (tmp_path / "c" / name).read_text().splitlines()]
    assert len(out) == len(ORIG) + len(GEN)
    assert len({r["id"] for r in out}) == len(out)
    assert {r["id"] for r in out if r["meta"]["type"] == "original"} == {
        f"kept.jsonl:{i}" for i in range(1, len(ORIG) + 1)
    }
