"""The Ray path (``--ray``) against the in-process path, same data, same run: what Ray costs on
this machine.

Run: ``python benchmarks/bench_ray.py [--generator DIR] [--classifier DIR] [--data FILE]
[--n 256] [--rows 2000] [--actors 1,2]`` (defaults: the demo run's generator, its first
``clf_original`` seed and its ``corpus/train.jsonl``, from ``runs/demo``: ``make demo``).

Starts a local Ray cluster with this machine's cores (``ray.init``, timed as ``init_s``), then:

- ``features``: the features step of z-statistics (default features) on
  ``--features-data`` (``snli_20k`` train) in this process, and as one Ray task per core over
  chunks of the records, their matrices not merged (a lower bound of what Ray would take);

- ``sample``: the same :func:`sample_generator` run (``--n`` samples, batches of 32, shards of
  16, 1 thread per sampler, fresh folder) in this process and on ``--actors`` Ray actors (1 CPU
  each); ``identical`` says whether the folder equals the in-process one, ``rounds_decoded``
  counts the rounds the actors decoded (in groups of 4, two groups per actor ahead);
- ``predict``: :meth:`EvaluationFiles.predict` of ``--rows`` rows (batches of 64) in this process
  and through Ray Data on ``--actors`` actors; ``identical``: the output file's bytes are equal.

Each Ray row gives ``seconds`` (the whole call: actors started, model loaded, work, actors
ended) and ``overhead_s`` (its seconds minus the in-process seconds). ``load`` is the load
average before and after. This process computes on 1 thread, as each actor does. The Ray
workers run at the driver's priority (``RAY_worker_niceness=0``; Ray's default is nice 15).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import data_dir

DEMO = Path("runs/demo")


def _same_folder(a: Path, b: Path) -> bool:
    def files(folder: Path) -> dict[str, bytes]:
        out = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "summary.json"}
        state = json.loads(out.pop("state.json"))
        state.pop("seconds")
        return {**out, "state.json": json.dumps(state).encode()}

    return files(a) == files(b)


def bench_sample(generator: Path, n: int, actors: list[int], tmp: Path) -> dict[str, Any]:
    from zdebias.generation.sample import sample_generator

    options = dict(batch_size=32, shard_size=16, threads=1, dtype="auto", progress=False)
    t = time.perf_counter()
    sample_generator(generator, tmp / "here", n, **options)
    here = time.perf_counter() - t
    rows: dict[str, Any] = {"in_process_s": round(here, 2)}
    for k in actors:
        t = time.perf_counter()
        out = tmp / f"ray-{k}"
        summary = sample_generator(generator, out, n, ray="auto", ray_actors=k, **options)
        took = time.perf_counter() - t
        rows[f"ray_{k}_actors"] = {
            "seconds": round(took, 2),
            "overhead_s": round(took - here, 2),
            "identical": _same_folder(tmp / "here", out),
            "rounds_decoded": summary["ray"]["rounds"],
        }
    return rows


def bench_predict(
    classifier: Path, data: Path, rows: int, actors: list[int], tmp: Path
) -> dict[str, Any]:
    from zdebias.classify.settings import InferenceSettings
    from zdebias.data.options import ReadOptions
    from zdebias.data.readers import read_records
    from zdebias.data.writers import write_records
    from zdebias.evaluation.files import EvaluationFiles

    records = read_records(data)[:rows]
    subset = tmp / "rows.jsonl"
    write_records(records, subset)
    files = EvaluationFiles(ReadOptions(task="nli"), progress=False)
    t = time.perf_counter()
    files.predict(str(classifier), str(subset), tmp / "here.jsonl", InferenceSettings())
    here = time.perf_counter() - t
    out: dict[str, Any] = {"rows": len(records), "in_process_s": round(here, 2)}
    for k in actors:
        settings = InferenceSettings(ray="auto", ray_actors=k)
        t = time.perf_counter()
        files.predict(str(classifier), str(subset), tmp / f"ray-{k}.jsonl", settings)
        took = time.perf_counter() - t
        out[f"ray_{k}_actors"] = {
            "seconds": round(took, 2),
            "overhead_s": round(took - here, 2),
            "identical": (tmp / f"ray-{k}.jsonl").read_bytes() == (tmp / "here.jsonl").read_bytes(),
        }
    return out


def _extract_chunk(records: list[Any]) -> Any:
    from zdebias.features.extract import extract_features

    return extract_features(records)


def bench_features(data: Path, parts: int) -> dict[str, Any]:
    """The features step of z-statistics: in this process, and as ``parts`` Ray tasks over
    chunks of the records (the chunks' matrices are not merged: a lower bound for Ray)."""
    import ray

    from zdebias.data.readers import read_records

    records = read_records(data)
    t = time.perf_counter()
    _extract_chunk(records)
    here = time.perf_counter() - t
    task = ray.remote(_extract_chunk)
    size = -(-len(records) // parts)
    t = time.perf_counter()
    ray.get([task.remote(records[i : i + size]) for i in range(0, len(records), size)])
    took = time.perf_counter() - t
    return {
        "rows": len(records),
        "in_process_s": round(here, 2),
        f"ray_{parts}_tasks_s": round(took, 2),
        "overhead_s": round(took - here, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generator", type=Path, default=DEMO / "generator" / "model")
    parser.add_argument("--classifier", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=DEMO / "corpus" / "train.jsonl")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--actors", default="1,2")
    parser.add_argument(
        "--features-data", type=Path, default=data_dir() / "snli_20k" / "train.jsonl"
    )
    args = parser.parse_args()
    classifier = args.classifier or sorted((DEMO / "clf_original").glob("seed-*"))[0]
    actors = [int(a) for a in args.actors.split(",")]

    import ray
    import torch

    torch.set_num_threads(1)  # as each 1-CPU actor (Ray sets its threads to its CPUs)
    load = [os.getloadavg()[0]]
    # Ray starts its workers at nice 15: on a busy machine they would get only what is left
    os.environ.setdefault("RAY_worker_niceness", "0")
    t = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False)
    result: dict[str, Any] = {"init_s": round(time.perf_counter() - t, 2), "cpus": os.cpu_count()}
    result["features"] = bench_features(args.features_data, os.cpu_count() or 2)
    with tempfile.TemporaryDirectory() as tmp:
        result["sample"] = {"n": args.n, **bench_sample(args.generator, args.n, actors, Path(tmp))}
        result["predict"] = bench_predict(classifier, args.data, args.rows, actors, Path(tmp))
    ray.shutdown()
    load.append(os.getloadavg()[0])
    result["load"] = [round(x, 2) for x in load]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
