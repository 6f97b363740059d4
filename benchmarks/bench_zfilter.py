"""Speed and memory of ``zdebias filter`` against a plain Python Algorithm 1 and bare parsing.

Run: ``python benchmarks/bench_zfilter.py`` (``make bench``). Options: ``--sizes`` (rows,
default ``100000,1000000``), ``--jobs`` (default ``parse,zdebias,one-process,reference``; the
reference takes ~5 min of CPU at 1M rows), ``--num-proc N`` (passed to ``zdebias filter``),
``--10m`` (or ``ZDEBIAS_BENCH_10M=1``: also 10M rows, zdebias only, long), ``--workdir``,
``--baseline SRC`` (also run ``zdebias filter`` from another source tree, e.g. ``git archive
OLD src | tar -x -C /tmp/old`` then ``--baseline /tmp/old/src``, alternating with this one, for
an old-vs-new ratio under the same load). Needs the real SNLI text: ``$ZDEBIAS_TEST_DATA``
(default ``../shared/data``).

Input: ``snli_20k/train.jsonl`` replicated to N rows, each with its own id (``r{copy}-{row}``),
built once into the work folder. For each size, each job runs in a fresh process (so its peak
memory is its own) and reports wall-clock and CPU seconds (child processes included) and peak
resident memory (for ``zdebias filter``, the largest sum over its process tree, sampled):

- ``parse+tokenise``: read the JSONL into records, tokenise premise and hypothesis;
- ``zdebias filter``: the command as a user runs it (start-up, read, features with the
  cross-fitted hypothesis-only model, Algorithm 1 at k 20 and batch 1,000, the stats of the
  kept rows, kept.jsonl / rejected.jsonl / summary.json written); on a file of 64 MB or more it
  uses every core, one process per byte range (``zdebias.stats.execution.sharded``);
- ``zdebias -j1``: the same with ``--num-proc 1`` (one process; the same output bytes);
- ``reference``: Algorithm 1 in plain Python (``json``, ``re``, dicts of counts updated
  incrementally, ``heapq`` for each batch's top-k): the same features but the hypothesis-only
  one, the same k, batch and visiting order (ties in z may break differently), writing kept
  and rejected ids.

The package is byte-compiled first (``compileall``), as ``pip install`` does: an editable
install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile every module of zdebias
at every start (about 0.1 s).

Each job but the reference runs ``--repeat`` times (default 3; once at 10M rows), the jobs
taking turns, and the run with the median wall time is shown.

The load average is printed before and after: on a shared machine wall time is noisy, CPU
time much less so. Targets (issue 17, 2 cores): 100k rows <= 2.5 s wall, 1M <= 15 s, 10M <= 8 GB
peak and <= 4 min.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import re
import resource
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

from _common import compile_package, data_dir

K, BATCH = 20, 1000


def build_input(path: Path, n: int) -> None:
    """``n`` rows of snli_20k train, repeated in order, each with a distinct id."""
    source = [
        json.loads(line)
        for line in (data_dir() / "snli_20k" / "train.jsonl").read_text().splitlines()
        if line.strip()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for i in range(n):
            copy, row = divmod(i, len(source))
            fh.write(json.dumps({"id": f"r{copy}-{row}", **source[row]}) + "\n")
    tmp.replace(path)
    print(f"built {path} ({n:,} rows: snli_20k train x {n / len(source):.1f})", flush=True)


# --------------------------------------------------------------------------- the jobs


def job_parse(path: Path, out: Path) -> dict[str, object]:
    """Read records and tokenise both texts (the floor any filter pays)."""
    from zdebias.data.readers import read_records
    from zdebias.features.tokenize import tokenize

    records = read_records(path)
    n_tokens = sum(len(tokenize(r.premise)) + len(tokenize(r.hypothesis)) for r in records)
    return {"n": len(records), "tokens": n_tokens}


def job_zdebias(path: Path, out: Path, num_proc: str) -> dict[str, object]:
    """``zdebias filter`` as a user runs it."""
    exe = Path(sys.executable).with_name("zdebias")
    cmd = [str(exe), "filter", str(path), "--out", str(out), "-q", "--overwrite"]
    if num_proc:
        cmd += ["--num-proc", num_proc]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    tree_peak = _tree_peak_rss(proc)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    summary = json.loads((out / "summary.json").read_text())
    return {"n": summary["n_input"], "kept": summary["n_kept"], "tree_peak_gb": tree_peak}


def _tree_peak_rss(proc: subprocess.Popen[bytes]) -> float:
    """Wait for ``proc``; the largest sum of resident memory of it and its child processes
    seen (sampled every 20 ms; pages shared after a fork count once per process, so this is
    an upper bound), in GB. The child processes are listed again every 10th sample (listing
    scans every process of the machine: 6 % of a core if done every time)."""
    import psutil

    peak = 0
    root = psutil.Process(proc.pid)
    tree = [root]
    samples = 0
    while proc.poll() is None:
        total = 0
        try:
            if samples % 10 == 0:
                tree = [root, *root.children(recursive=True)]
            for p in tree:
                total += p.memory_info().rss
        except psutil.Error:
            tree = [root]
            samples = -1  # list them again next time
        samples += 1
        peak = max(peak, total)
        time.sleep(0.02)
    return peak / 1024**3


TOKEN = re.compile(r"\w+(?:'\w+)?")


def reference_features(premise: str, hypothesis: str) -> set[str]:
    """Default features minus hypothesis-only, written the plain way."""
    p = TOKEN.findall(premise.lower())
    h = TOKEN.findall(hypothesis.lower())
    feats = {"<null>"}
    for words, where in ((p, "premise"), (h, "hypothesis")):
        feats.update(f"{w}@{where}" for w in words)
        feats.update(f"{a} {b}@{where}" for a, b in pairwise(words))
    feats.add(next((f"hypo-len<{e}" for e in (5, 10, 15) if len(h) < e), "hypo-len>=15"))
    ratio = len(h) / max(len(p), 1)
    feats.add(
        next((f"len-ratio<{e:g}" for e in (0.25, 0.5, 0.75, 1.0) if ratio < e), "len-ratio>=1")
    )
    overlap = sum(w in set(p) for w in h) / max(len(h), 1)
    feats.update(f"lex-overlap>{t:g}" for t in (0.5, 0.6, 0.7, 0.8, 0.9) if overlap > t)
    if overlap == 1:
        feats.add("full-lex-overlap")
    if overlap == 0:
        feats.add("no-lex-overlap")
    return feats


def job_reference(path: Path, out: Path) -> dict[str, object]:
    """GD-NLI Algorithm 1 in plain Python, counts updated incrementally."""
    labels = ["entailment", "neutral", "contradiction"]
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["label"] in labels:
                feats = reference_features(d["premise"], d["hypothesis"])
                rows.append((d["id"], labels.index(d["label"]), feats))
    import numpy as np  # only for the visiting order: the one zdebias uses with seed 0

    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows)).tolist()]
    p0 = 1 / len(labels)
    counts: dict[str, list[int]] = {}
    z: list[dict[str, float]] = [{} for _ in labels]
    kept, rejected = [], []
    for start in range(0, len(rows), BATCH):
        biased = [{f for f in heapq.nlargest(K, zl, key=zl.__getitem__) if zl[f] > 0} for zl in z]
        accepted = []
        for rid, label, feats in rows[start : start + BATCH]:
            if feats & biased[label]:
                rejected.append(rid)
            else:
                kept.append(rid)
                accepted.append((label, feats))
        touched = set()
        for label, feats in accepted:
            for f in feats:
                c = counts.setdefault(f, [0] * len(labels))
                c[label] += 1
            touched |= feats
        for f in touched:
            c = counts[f]
            n = sum(c)
            for li in range(len(labels)):
                z[li][f] = (c[li] / n - p0) / math.sqrt(p0 * (1 - p0) / n)
    out.mkdir(parents=True, exist_ok=True)
    (out / "kept.txt").write_text("\n".join(kept) + "\n")
    (out / "rejected.txt").write_text("\n".join(rejected) + "\n")
    return {"n": len(rows), "kept": len(kept)}


JOBS = {
    "parse": job_parse,
    "zdebias": job_zdebias,
    "one-process": job_zdebias,
    "reference": job_reference,
}


def run_job(
    job: str, path: Path, workdir: Path, num_proc: str, source: Path | None = None
) -> dict[str, object]:
    """One job in a fresh process: its result, wall and CPU seconds, peak memory.

    ``source``: import zdebias from that source tree (``PYTHONPATH``) instead of this one."""
    cmd = [sys.executable, __file__, "--job", job, "--input", str(path), "--workdir", str(workdir)]
    if num_proc:
        cmd += ["--num-proc", num_proc]
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        cmd += ["--workdir", str(workdir / "baseline")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"job {job} failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _in_job(job: str, path: Path, workdir: Path, num_proc: str) -> None:
    wall = time.perf_counter()
    out = workdir / f"out-{job}"
    if job == "zdebias":
        result = job_zdebias(path, out, num_proc)
    elif job == "one-process":
        result = job_zdebias(path, out, "1")
    else:
        result = JOBS[job](path, out)
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    result.update(
        wall_s=time.perf_counter() - wall,
        cpu_s=me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        # Linux: KiB; zdebias filter's worker processes: the sum over its process tree
        peak_gb=max(
            me.ru_maxrss / 1024**2, kids.ru_maxrss / 1024**2, result.pop("tree_peak_gb", 0)
        ),
    )
    print(json.dumps(result))


def _rounds(
    jobs: list[str], path: Path, workdir: Path, num_proc: str, repeat: int, n: int
) -> dict[str, dict[str, object]]:
    """Each job's median run (by wall time) over ``repeat`` rounds of all jobs in turn (so
    that a change of the machine's load touches them alike); the reference, and every job
    at 10M rows, run once."""
    runs: dict[str, list[dict[str, object]]] = {job: [] for job in jobs}
    for k in range(max(1, repeat)):
        for job in jobs:
            if k and (job == "reference" or n >= 10_000_000):
                continue
            runs[job].append(run_job(job, path, workdir, num_proc))
    out = {}
    for job, got in runs.items():
        got.sort(key=lambda r: float(r["wall_s"]))  # type: ignore[arg-type]
        out[job] = {**got[len(got) // 2], "runs": len(got)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="rows, comma-separated")
    parser.add_argument("--10m", dest="ten_m", action="store_true", help="also 10M rows")
    parser.add_argument("--num-proc", default="", help="zdebias filter --num-proc")
    parser.add_argument(
        "--jobs",
        default="parse,zdebias,one-process,reference",
        help="which jobs (comma-separated)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds of the jobs (the median run is shown)"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/zdebias-bench"))
    parser.add_argument(
        "--baseline", type=Path, help="also time zdebias filter from this source tree"
    )
    parser.add_argument("--job", choices=sorted(JOBS), help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        _in_job(args.job, args.input, args.workdir, args.num_proc)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    compile_package()
    if args.baseline is not None:
        compile_package(args.baseline)
    if args.ten_m or os.environ.get("ZDEBIAS_BENCH_10M") == "1":
        sizes.append(10_000_000)
    print(
        f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}; "
        "wall / CPU seconds (CPU includes child processes), peak resident memory",
        flush=True,
    )
    header = f"{'rows':>10}  {'job':<15} {'wall s':>8} {'cpu s':>8} {'peak GB':>8}  result"
    print(header)
    for n in sizes:
        path = args.workdir / f"snli20k_x_{n}.jsonl"
        if not path.exists():
            build_input(path, n)
        # the 10M row measures zdebias alone (the reference would take an hour)
        jobs = [j for j in args.jobs.split(",") if j in JOBS]
        if n >= 10_000_000:
            jobs = [j for j in jobs if j != "reference"]
        results = {}
        if args.baseline is None:
            results = _rounds(jobs, path, args.workdir, args.num_proc, args.repeat, n)
            jobs = []
        for job in jobs:
            if job == "zdebias" and args.baseline is not None:
                # baseline, this tree, baseline again: the load drifts, the mean is fairer
                runs = [
                    run_job(job, path, args.workdir, args.num_proc, args.baseline),
                    run_job(job, path, args.workdir, args.num_proc),
                    run_job(job, path, args.workdir, args.num_proc, args.baseline),
                ]
                results["baseline"] = {
                    **runs[0],
                    **{k: (runs[0][k] + runs[2][k]) / 2 for k in ("wall_s", "cpu_s", "peak_gb")},
                }
                results[job] = runs[1]
            else:
                results[job] = run_job(job, path, args.workdir, args.num_proc)
        for job, r in results.items():
            extra = f"kept {r['kept']:,} of {r['n']:,}" if "kept" in r else f"{r['n']:,} rows"
            if job != "parse" and "parse" in results:
                extra += f"; {r['wall_s'] / results['parse']['wall_s']:.1f}x parse wall"
            if int(r.get("runs", 1)) > 1:
                extra += f"; median of {r['runs']}"
            name = {
                "parse": "parse+tokenise",
                "zdebias": "zdebias filter",
                "one-process": "zdebias -j1",
                "baseline": "zdebias (base)",
            }.get(job, job)
            print(
                f"{n:>10,}  {name:<15} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} "
                f"{r['peak_gb']:>8.2f}  {extra}",
                flush=True,
            )
        if {"baseline", "zdebias"} <= results.keys():
            z, base = results["zdebias"], results["baseline"]
            print(
                f"{'':>10}  zdebias / baseline: {z['wall_s'] / base['wall_s']:.2f}x wall, "
                f"{z['cpu_s'] / base['cpu_s']:.2f}x CPU, {z['peak_gb'] / base['peak_gb']:.2f}x "
                "peak memory",
                flush=True,
            )
        if {"reference", "zdebias"} <= results.keys():
            z, ref = results["zdebias"], results["reference"]
            print(
                f"{'':>10}  zdebias / reference: {z['wall_s'] / ref['wall_s']:.2f}x wall, "
                f"{z['cpu_s'] / ref['cpu_s']:.2f}x CPU",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
