"""The training sets behind docs/results.md are published compactly (docs/data/NAME/: ordered
ids, and rows the source lacks) and rebuild exactly from them and the shared data."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
POOL = ROOT / "docs" / "data" / "snli-pool-cpu"
GD_NLI = ROOT / "docs" / "data" / "snli20k-cpu"
AUTOCAD = ROOT / "docs" / "data" / "autocad-sst2-cpu"
FILTERS = ROOT / "docs" / "data" / "snli20k-filters-cpu"
TARGETED = ROOT / "docs" / "data" / "snli20k-targeted-cpu"


@pytest.fixture(scope="module")
def sets() -> Any:
    return load_script("training_sets")


def test_the_pool_experiment_sets_rebuild_exactly(sets: Any, data_dir: Path) -> None:
    built = sets.rebuild(POOL, data_dir)
    sizes = {name: len(rows) for name, rows in built.items()}
    assert sizes == {"d0": 5000, "z_aug": 7693, "d0_random": 7693, "d0_pool": 19993}
    d0 = {r.id for r in built["d0"]}
    # D0 is whole in every set; the pool sets add only pool rows; D0 ∪ pool is snli_20k train
    for name in ("z_aug", "d0_random", "d0_pool"):
        assert [r.id for r in built[name][:5000]] == [r.id for r in built["d0"]]
        assert not d0 & {r.id for r in built[name][5000:]}
    train = (data_dir / "snli_20k" / "train.jsonl").read_text().count("\n")
    assert len({r.id for r in built["d0_pool"]}) == train == 19993
    # the same-size random control and Z-Aug share only what chance gives
    added = {r.id for r in built["z_aug"][5000:]}
    assert len(added) == len({r.id for r in built["d0_random"][5000:]}) == 2693


def test_the_gd_nli_filtered_and_random_sets_rebuild_exactly(sets: Any, data_dir: Path) -> None:
    built = sets.rebuild(GD_NLI, data_dir)
    assert {name: len(rows) for name, rows in built.items()} == {
        "zfilter": 7139,
        "random_subset": 7139,
        "z_aug": 20162,
        "par_z": 7618,
        "seq_z": 7180,
    }
    # both are subsets of D0 without repeats, and overlap about as chance gives (7139² / 19993)
    kept, random = ({r.id for r in built[name]} for name in ("zfilter", "random_subset"))
    assert len(kept) == len(random) == 7139
    assert 2300 < len(kept & random) < 2800
    labels = Counter(r.label for r in built["zfilter"])
    assert labels == {"entailment": 2177, "neutral": 2446, "contradiction": 2516}
    # the recipes' sets: D0 or Z(D0) whole, plus the generated rows each recipe accepted out of
    # the 479 confident samples (Z-Aug 169, Par-Z all, Seq-Z 41), none of them twice
    d0 = {r.id for r in built["z_aug"] if not r.id.startswith("gen-")}
    assert len(d0) == 19993
    generated = {}
    for name, base in (("z_aug", d0), ("par_z", kept), ("seq_z", kept)):
        ids = [r.id for r in built[name]]
        assert {i for i in ids if not i.startswith("gen-")} == base
        generated[name] = {i for i in ids if i.startswith("gen-")}
        assert len(ids) == len(set(ids)) == len(base) + len(generated[name])
    assert {name: len(ids) for name, ids in generated.items()} == {
        "z_aug": 169,
        "par_z": 479,
        "seq_z": 41,
    }
    assert generated["z_aug"] | generated["seq_z"] <= generated["par_z"]


def test_the_filters_comparison_sets_rebuild_exactly(sets: Any, data_dir: Path) -> None:
    built = sets.rebuild(FILTERS, data_dir)
    assert {name: len(rows) for name, rows in built.items()} == {
        "aflite": 7139,
        "carto_ambiguous": 7139,
        "carto_hard": 7139,
    }
    # each filter keeps the size of Z(D0), rows of D0 without repeats; the hard-to-learn region
    # leans to neutral (its rows are the ones the data map's model got wrong most)
    assert {name: dict(Counter(r.label for r in rows)) for name, rows in built.items()} == {
        "aflite": {"entailment": 2314, "neutral": 2445, "contradiction": 2380},
        "carto_ambiguous": {"entailment": 2180, "neutral": 2596, "contradiction": 2363},
        "carto_hard": {"entailment": 1652, "neutral": 3266, "contradiction": 2221},
    }
    from zdebias.data.readers import read_records

    d0 = {r.id for r in read_records(data_dir / "snli_20k" / "train.jsonl")}
    kept = {name: {r.id for r in rows} for name, rows in built.items()}
    assert all(len(ids) == 7139 and ids <= d0 for ids in kept.values())
    with gzip.open(GD_NLI / "zfilter.ids.txt.gz", "rt") as fh:
        zfilter = set(fh.read().split())
    # chance overlap of two 7,139-row thirds of 19,993 rows is about 2,549
    overlap = {name: len(ids & zfilter) for name, ids in kept.items()}
    assert overlap == {"aflite": 2911, "carto_ambiguous": 2732, "carto_hard": 3403}
    assert len(kept["carto_ambiguous"] & kept["carto_hard"]) == 3640


def test_the_targeted_variants_rebuild_exactly(sets: Any, data_dir: Path) -> None:
    built = sets.rebuild(TARGETED, data_dir)
    # each variant is D0 whole and first, then the candidates Z-Aug accepted, none twice
    d0 = built["z_aug"][:19993]
    assert len({r.id for r in d0}) == 19993
    added: dict[str, Counter[tuple[str, str]]] = {}
    for name, rows in built.items():
        assert [r.id for r in rows[:19993]] == [r.id for r in d0]
        assert len({r.id for r in rows}) == len(rows)
        added[name] = Counter((r.id.split("-")[0], r.label) for r in rows[19993:])
    assert {name: len(rows) - 19993 for name, rows in built.items()} == {
        "z_aug": 141,
        "z_aug_targeted": 546,
        "z_aug_no_rules": 138,
        "z_aug_tau_judge": 480,
        "z_aug_untargeted": 603,
        "z_aug_unconditioned": 618,
        "z_aug_rules_only": 408,
    }
    # the same 408 transforms in every variant that offers them: 406 of them inversions and
    # subsequences labelled neutral, which break the overlap shortcut; 2 entailment transforms
    rules = {("tf", "neutral"): 406, ("tf", "entailment"): 2}
    assert added["z_aug_rules_only"] == rules
    assert added["z_aug_targeted"] == rules | {
        ("gen", "contradiction"): 126,
        ("gen", "neutral"): 11,
        ("gen", "entailment"): 1,
    }
    assert added["z_aug_targeted"] - Counter(rules) == added["z_aug_no_rules"]
    assert added["z_aug_tau_judge"] == rules | {("gen", "contradiction"): 69, ("gen", "neutral"): 3}
    transforms = {r.id for r in built["z_aug_rules_only"][19993:]}
    for name in ("z_aug_targeted", "z_aug_tau_judge", "z_aug_untargeted", "z_aug_unconditioned"):
        assert {r.id for r in built[name][19993:] if r.id.startswith("tf-")} == transforms


def test_the_hard_to_learn_hand_labels_are_of_snli_20k_rows(data_dir: Path) -> None:
    from zdebias.data.readers import read_records

    doc = json.loads((ROOT / "docs" / "data" / "carto-hard-hand-labels.json").read_text())
    d0 = {r.id: r for r in read_records(data_dir / "snli_20k" / "train.jsonl")}
    with gzip.open(FILTERS / "carto_hard.ids.txt.gz", "rt") as fh:
        region = set(fh.read().split())
    rows = doc["rows"]
    assert Counter(r["group"] for r in rows) == {"hard": 30, "d0": 30}
    # each label is of a pair snli_20k holds; the file copies neither its texts nor its gold label
    assert len({r["id"] for r in rows}) == 60 and all(r["id"] in d0 for r in rows)
    assert all(set(r) == {"group", "id", "hand"} for r in rows)
    gold = {r["id"]: d0[r["id"]].label for r in rows}
    assert all(r["id"] in region for r in rows if r["group"] == "hard")
    # docs/results.md: 30 of the 37 pairs in the region get their gold label back, 23 of 23 outside
    agree = Counter((r["id"] in region, r["hand"] == gold[r["id"]]) for r in rows)
    assert agree == {(True, True): 30, (True, False): 7, (False, True): 23}
    # five of the 7 disagreements are gold-neutral pairs
    missed = Counter(gold[r["id"]] for r in rows if r["hand"] != gold[r["id"]])
    assert missed == {"neutral": 5, "entailment": 1, "contradiction": 1}


def test_the_targeted_hand_labels_name_snli_20k_premises(data_dir: Path) -> None:
    tables = load_script("results_tables")
    path = ROOT / "docs" / "data" / "targeted-hand-labels.json"
    doc = json.loads(path.read_text())
    assert doc["source"] == "snli_20k/train.jsonl"
    assert all("premise" not in t for t in doc["texts"].values())  # rows of D0, not copies
    texts = tables._hand_texts(path, doc, data_dir)
    assert set(texts) == set(doc["labels"]) and len(texts) == 45
    hand = doc["labels"]
    verdict = Counter(
        "garbled" if hand[i] is None else "right" if hand[i] == t[2] else "wrong"
        for i, t in texts.items()
    )
    # docs/results.md: 7 of the 45 carry a label we agree with, 17 too garbled, 21 wrong; none of
    # the 6 generated "entailment" samples is entailed
    assert verdict == {"right": 7, "garbled": 17, "wrong": 21}
    entailment = [i for i, t in texts.items() if t[2] == "entailment"]
    assert len(entailment) == 6 and all(hand[i] != "entailment" for i in entailment)
    earlier = json.loads((ROOT / "docs" / "data" / "targeted-hand-labels-earlier.json").read_text())
    assert (
        set(earlier) == {"description", "stage", "seed", "labels"} and len(earlier["labels"]) == 45
    )


def test_the_autocad_sets_rebuild_exactly(sets: Any, data_dir: Path) -> None:
    built = sets.rebuild(AUTOCAD, data_dir)
    assert {name: len(rows) for name, rows in built.items()} == {"train": 2000, "augmented": 3158}
    # D0 is 2,000 distinct SST-2 training sentences, whole and first in the augmented set; the
    # 1,158 counterfactuals the classifier accepted follow, each the other label of its source
    d0 = built["train"]
    assert len({r.id for r in d0}) == 2000
    assert all(r.id.startswith("train_full.tsv:") for r in d0)
    assert [r.id for r in built["augmented"][:2000]] == [r.id for r in d0]
    by_id = {r.id: r for r in d0}
    added = built["augmented"][2000:]
    assert len({r.id for r in added}) == 1158
    for r in added:
        source, kind, target, _ = r.id.rsplit(":", 3)
        assert kind == "cf" and source in by_id and r.label == target != by_id[source].label
        assert r.text != by_id[source].text
    assert Counter(r.label for r in d0) == {"positive": 1100, "negative": 900}


def test_a_changed_row_fails_the_rebuild(sets: Any, data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "pool"
    shutil.copytree(POOL, folder)
    doc = json.loads((folder / "sets.json").read_text())
    doc["sets"] = {"d0": doc["sets"]["d0"]}
    (folder / "sets.json").write_text(json.dumps(doc))
    assert len(sets.rebuild(folder, data_dir)["d0"]) == 5000
    with gzip.open(folder / "d0.ids.txt.gz", "rt") as fh:
        ids = fh.read().splitlines()
    with gzip.open(
        folder / "d0.ids.txt.gz", "wt"
    ) as fh:  # two rows swapped: same rows, other order
        fh.write("\n".join([ids[1], ids[0], *ids[2:]]) + "\n")
    with pytest.raises(ValueError, match="d0: the rebuilt rows differ from the recorded digest"):
        sets.rebuild(folder, data_dir)
    with gzip.open(folder / "d0.ids.txt.gz", "wt") as fh:
        fh.write("\n".join(ids[:-1]) + "\n")
    with pytest.raises(ValueError, match="d0: 4999 rows rebuilt, 5000 recorded"):
        sets.rebuild(folder, data_dir)
    with gzip.open(folder / "d0.ids.txt.gz", "wt") as fh:  # an id snli_20k does not have
        fh.write("\n".join([*ids[:2], "no-such-id", *ids[3:]]) + "\n")
    with pytest.raises(ValueError, match=r"d0\.ids\.txt\.gz:3: id 'no-such-id' is neither in "):
        sets.rebuild(folder, data_dir)


def test_rows_the_source_lacks_are_published_whole(sets: Any, tmp_path: Path) -> None:
    from zdebias.data.schema import Record
    from zdebias.data.writers import write_records

    source = [Record(f"s{i}", "neutral", f"p{i}", f"h{i}") for i in range(3)]
    write_records(source, tmp_path / "data" / "src.jsonl")
    kept = [
        source[2],
        Record("g0", "entailment", "p", "made up", meta={"type": "generated"}),
        source[0].replace(hypothesis="edited"),  # a source id with other content: its own row
    ]
    write_records(kept, tmp_path / "run" / "mix" / "data.jsonl")
    stages = [{"name": "mix", "outputs": {"data": {"path": "mix/data.jsonl"}}}]
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"stages": stages}))
    doc = sets.publish(
        tmp_path / "run", ["mix"], tmp_path / "data/src.jsonl", "src.jsonl", tmp_path / "pub", "r"
    )
    assert doc["sets"]["mix"]["rows"] == 3 and doc["sets"]["mix"]["from_source"] == 1
    built = sets.rebuild(tmp_path / "pub", tmp_path / "data")["mix"]
    assert [(r.id, r.hypothesis) for r in built] == [
        ("s2", "h2"),
        ("g0", "made up"),
        ("s0", "edited"),
    ]
    assert all(not r.meta for r in built)  # what training reads, without the run's tags


def test_own_rows_name_the_source_texts_they_share(sets: Any, tmp_path: Path) -> None:
    from zdebias.data.schema import Record
    from zdebias.data.writers import write_records

    source = [Record(f"s{i}", "neutral", f"p{i}", f"h{i}") for i in range(3)]
    write_records(source, tmp_path / "data" / "src.jsonl")
    kept = [
        source[0],
        Record("g0", "entailment", "p1", "made up"),  # a source premise, an own hypothesis
        Record("g1", "contradiction", "h2", "p1"),  # texts of the source in the other field
    ]
    write_records(kept, tmp_path / "run" / "mix" / "data.jsonl")
    stages = [{"name": "mix", "outputs": {"data": {"path": "mix/data.jsonl"}}}]
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"stages": stages}))
    doc = sets.publish(
        tmp_path / "run", ["mix"], tmp_path / "data/src.jsonl", "src.jsonl", tmp_path / "pub", "r"
    )
    entry = doc["sets"]["mix"]
    with gzip.open(tmp_path / "pub" / entry["own_file"], "rt") as fh:
        own = [json.loads(line) for line in fh]
    assert own == [
        {
            "id": "g0",
            "label": "entailment",
            "premise_from": ["s1", "premise"],
            "hypothesis": "made up",
        },
        {
            "id": "g1",
            "label": "contradiction",
            "premise_from": ["s2", "hypothesis"],
            "hypothesis_from": ["s1", "premise"],
        },
    ]
    built = sets.rebuild(tmp_path / "pub", tmp_path / "data")["mix"]
    assert [(r.id, r.label, r.premise, r.hypothesis) for r in built] == [
        ("s0", "neutral", "p0", "h0"),
        ("g0", "entailment", "p1", "made up"),
        ("g1", "contradiction", "h2", "p1"),
    ]
    write_records(source[:1], tmp_path / "data" / "src.jsonl")  # the named row is gone
    with pytest.raises(ValueError, match=r"premise refers to 'premise' of row 's1'"):
        sets.rebuild(tmp_path / "pub", tmp_path / "data")


def test_own_rows_published_whole_are_externalized_with_the_same_digest(
    sets: Any, tmp_path: Path
) -> None:
    from zdebias.data.schema import Record
    from zdebias.data.writers import write_records

    source = [Record(f"s{i}", "neutral", f"p{i}", f"h{i}") for i in range(2)]
    write_records(source, tmp_path / "data" / "src.jsonl")
    own = [Record("g0", "entailment", "p1", "made up")]
    rows = [source[0], *own]
    pub = tmp_path / "pub"
    pub.mkdir()
    with gzip.open(pub / "mix.ids.txt.gz", "wt") as fh:
        fh.write("s0\ng0\n")
    write_records(own, pub / "mix.rows.jsonl")
    with gzip.open(pub / "mix.rows.jsonl.gz", "wb") as fh:
        fh.write((pub / "mix.rows.jsonl").read_bytes())
    (pub / "mix.rows.jsonl").unlink()
    entry = {"rows": 2, "digest": sets.content_digest(rows), "ids": "mix.ids.txt.gz"}
    doc = {"source": "src.jsonl", "sets": {"mix": {**entry, "rows_file": "mix.rows.jsonl.gz"}}}
    (pub / "sets.json").write_text(json.dumps(doc))
    assert sets.rebuild(pub, tmp_path / "data")["mix"] == rows  # the older form still reads
    assert sets.externalize(pub, tmp_path / "data") == [pub / "mix.rows.jsonl.gz"]
    doc = json.loads((pub / "sets.json").read_text())
    assert doc["sets"]["mix"] == {**entry, "own_file": "mix.own.jsonl.gz"}
    with gzip.open(pub / "mix.own.jsonl.gz", "rt") as fh:
        assert "p1" not in fh.read()
    (pub / "mix.rows.jsonl.gz").unlink()
    assert sets.rebuild(pub, tmp_path / "data")["mix"] == rows


def test_no_published_file_copies_a_text_of_its_source(data_dir: Path) -> None:
    from zdebias.data.readers import read_records

    for doc_path in sorted(ROOT.glob("docs/data/*/sets.json")):
        doc = json.loads(doc_path.read_text())
        texts = {
            t
            for r in read_records(data_dir / doc["source"])
            for t in (r.premise, r.hypothesis, r.text)
            if t is not None
        }
        assert not list(doc_path.parent.glob("*.rows.jsonl.gz"))
        for entry in doc["sets"].values():
            if "own_file" not in entry:
                continue
            with gzip.open(doc_path.parent / entry["own_file"], "rt") as fh:
                own = [json.loads(line) for line in fh]
            for row in own:
                assert not {row.get(f) for f in ("premise", "hypothesis", "text")} & texts
