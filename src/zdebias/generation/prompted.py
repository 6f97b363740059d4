"""Prompted NLI generation: an instruction model writes the hypotheses (``--backend openai``
or ``local``), an alternative to fine-tuning a generator (docs/design.md §6).

For each request the sampler picks a premise (``premises``, deduplicated, in a seeded order)
and a target label (labels balanced: each premise is asked for every label in turn, and a
label whose share of ``n`` is written is no longer asked for), then builds a few-shot prompt:
``few_shot`` examples of that label drawn (seeded per request) from ``examples``, and with
``avoid_biased`` the label's most biased hypothesis n-grams in ``examples`` (top z,
docs/design.md §3) listed as words to avoid. The answer is parsed strictly (:func:`parse_answer`): a
failed request, an empty, malformed, cut-off, label-echoing or premise-copying answer is dropped and
counted by reason; duplicates are dropped as in :mod:`zdebias.generation.rounds`, whose
shards, ``state.json``, resume and summary this backend shares. Each request's token usage,
attempts and time go to ``requests-NNNNN.jsonl`` and add up in the summary's ``usage``.

Backends:

- ``openai``: any OpenAI-compatible server (vLLM, llama.cpp, TGI, ``transformers serve``,
  a hosted API): ``POST {base_url}/chat/completions`` (or ``/completions``), ``concurrency``
  requests in flight, retries with exponential backoff on 429, 5xx, timeouts and lost
  connections, the per-request seed passed as ``seed``. The API key is read from the
  environment variable named by ``api_key_env`` and never logged or saved.
- ``local``: the model in-process (``smollm2``, a folder or a hub name) with its chat
  template; one batched, seeded ``generate`` per round.

>>> sample_generator("smollm2", "runs/prompted", n=30, backend="local",
...                  premises=records)                                    # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from zdebias.data.labels import infer_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, ZdebiasError
from zdebias.generation.backends import Backends
from zdebias.generation.format import ParsedSample, sample_key
from zdebias.generation.premises import unique_premises
from zdebias.generation.rounds import Candidate, RoundOutput, label_quota, round_seed, run_rounds
from zdebias.generation.settings import ClientSettings, PromptSettings, SampleSettings
from zdebias.generation.store import open_run
from zdebias.models.compute import model_device

log = logging.getLogger("zdebias")

#: the prompt template's version: a resumed run must use the same prompts
PROMPT_VERSION = 2

#: why a prompted answer was dropped (the keys of the summary's ``malformed``)
PARSE_REASONS = (
    "request_failed",  # no answer after every retry
    "bad_response",  # the server answered 200 with something that is not a completion
    "empty",  # nothing left after stripping
    "malformed",  # more than one line, or no letter at all
    "over_length",  # cut off at max_tokens
    "label_echo",  # names a label or talks about the premise / hypothesis
    "copies_premise",  # the premise itself
)

#: what each NLI label asks of the hypothesis (the prompt never names the label)
LABEL_ASKS = {
    "entailment": "definitely true if the premise is true",
    "neutral": "might be true or false: it adds a detail that the premise does not mention",
    "contradiction": "definitely false if the premise is true",
}

SYSTEM = (
    "You write hypotheses for a natural language inference dataset. Given a premise, write "
    "one short, natural sentence. Answer with that sentence only."
)


# --------------------------------------------------------------------------- prompts


@dataclass
class PromptRequest:
    """One request: a premise, a target label, few-shot examples, words to avoid, a seed."""

    round: int
    index: int
    premise: str
    premise_id: str
    label: str
    shots: list[Record]
    avoid: list[str]
    seed: int

    def _ask(self, premise: str) -> str:
        ask = LABEL_ASKS.get(self.label, f"labelled {self.label!r} for it")
        return (
            f"Premise: {premise}\nWrite a new sentence, not a copy of the premise, that is {ask}."
        )

    def _avoid_line(self) -> str:
        return f"Do not use these words or phrases: {', '.join(self.avoid)}." if self.avoid else ""

    def messages(self) -> list[dict[str, str]]:
        """The chat messages: system, then one user/assistant turn per example, then the ask."""
        system = " ".join(x for x in (SYSTEM, self._avoid_line()) if x)
        out = [{"role": "system", "content": system}]
        for shot in self.shots:
            out.append({"role": "user", "content": self._ask(shot.premise or "")})
            out.append({"role": "assistant", "content": shot.hypothesis or ""})
        out.append({"role": "user", "content": self._ask(self.premise)})
        return out

    @property
    def stop(self) -> list[str]:
        """Where a completions-endpoint answer ends."""
        return ["\n"]

    def text(self) -> str:
        """The plain prompt of the completions endpoint; the answer ends at a newline."""
        ask = LABEL_ASKS.get(self.label, f"labelled {self.label!r} for its premise")
        lines = [f"Each hypothesis below is a short sentence that is {ask}."]
        if self.avoid:
            lines.append(self._avoid_line())
        lines.append("")
        for shot in self.shots:
            lines += [f"Premise: {shot.premise}", f"Hypothesis: {shot.hypothesis}", ""]
        lines += [f"Premise: {self.premise}", "Hypothesis:"]
        return "\n".join(lines)


class Prompt(Protocol):
    """What a backend needs of a request: chat messages or a plain prompt, stops, a seed."""

    seed: int

    @property
    def stop(self) -> list[str]: ...

    def messages(self) -> list[dict[str, str]]: ...

    def text(self) -> str: ...


def request_seed(seed: int, round_index: int, index: int) -> int:
    """The seed of one request (a 31-bit int: servers disagree on wider ones)."""
    digest = hashlib.blake2b(f"{seed}:{round_index}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def biased_words(
    examples: Sequence[Record], labels: Sequence[str], k: int, *, min_n: int = 5
) -> dict[str, list[str]]:
    """Per label, the ``k`` hypothesis n-grams (1-2 words) with the highest z in ``examples``
    and z > 0 (features seen in fewer than ``min_n`` examples are skipped)."""
    import numpy as np

    from zdebias.stats.measure import measure
    from zdebias.stats.zstats import top_k

    if k <= 0 or not examples:
        return {lab: [] for lab in labels}
    m = measure(examples, labels=labels, features=["unigrams", "bigrams"])
    hyp = np.array([name.endswith("@hypothesis") for name in m.names])
    z = np.where(hyp[:, None], m.z, -np.inf)
    picked = top_k(z, k, n=m.n, min_n=min_n, min_z=0.0)
    return {
        lab: [m.names[j].rsplit("@", 1)[0] for j in picked[i].tolist()]
        for i, lab in enumerate(labels)
    }


_PREFIX = re.compile(r"^\s*(?:hypothesis|answer|sentence)\s*:\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’`"
_ECHO = re.compile(r"\b(?:entail\w*|contradict\w*|neutral|premise|hypothes[ie]s)\b", re.I)
_LETTER = re.compile(r"[^\W\d_]")
_SPACES = re.compile(r"\s+")


def parse_answer(
    text: str | None,
    premise: str,
    label: str,
    *,
    labels: Sequence[str] = (),
    finish_reason: str | None = "stop",
) -> ParsedSample:
    """An answer as (premise, label, hypothesis), or with ``error`` one of
    :data:`PARSE_REASONS`: one line, a ``Hypothesis:`` prefix and wrapping quotes allowed."""
    if finish_reason == "length":
        return ParsedSample(premise, label, text, "over_length")
    body = _PREFIX.sub("", (text or "").strip(), count=1).strip()
    if len(body) >= 2 and body[0] in _QUOTES and body[-1] in _QUOTES:
        body = body[1:-1].strip()
    if not body:
        return ParsedSample(premise, label, body, "empty")
    if "\n" in body or not _LETTER.search(body):
        return ParsedSample(premise, label, body, "malformed")
    names = [re.escape(x) for x in labels if x not in LABEL_ASKS]
    extra = re.compile(rf"\b(?:{'|'.join(names)})\b", re.I) if names else None
    if _ECHO.search(body) or (extra is not None and extra.search(body)):
        return ParsedSample(premise, label, body, "label_echo")
    norm = [_SPACES.sub(" ", x).strip().rstrip(".!").casefold() for x in (body, premise)]
    if norm[0] == norm[1]:
        return ParsedSample(premise, label, body, "copies_premise")
    return ParsedSample(premise, label, body)


# --------------------------------------------------------------------------- backends


@dataclass
class Answer:
    """A request's outcome: the text (None when it failed), why it stopped, its usage."""

    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    seconds: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def api_url(base_url: str) -> str:
    """``base_url`` without a trailing slash, with ``/v1`` added to a bare ``http://host:port``."""
    from urllib.parse import urlsplit

    url = base_url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--base-url {base_url!r}: expected http(s)://HOST[:PORT][/PATH]")
    return url if parts.path not in ("", "/") else url + "/v1"


class OpenAIBackend:
    """Requests to an OpenAI-compatible server: a bounded pool, retries, timeouts."""

    RETRY_STATUS = frozenset({408, 409, 425, 429})
    MAX_WAIT = 30.0

    def __init__(self, model: str, cfg: SampleSettings, prompt: ClientSettings) -> None:
        import httpx2 as httpx

        if not prompt.base_url:
            raise ConfigError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        self.httpx = httpx
        self.url = api_url(prompt.base_url)
        self.model, self.cfg, self.prompt = model, cfg, prompt
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(prompt.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(prompt.timeout),
            limits=httpx.Limits(max_connections=prompt.concurrency),
        )
        self.pool = ThreadPoolExecutor(prompt.concurrency, thread_name_prefix="zdebias-request")
        self._stop = threading.Event()

    def reach(self) -> None:
        """One GET of ``/models``: fail before anything is removed when no server answers
        or it refuses the key (any other answer, a 404 too, means a server is there)."""
        httpx = self.httpx
        try:
            resp = self.client.get(self.url + "/models")
        except (httpx.TimeoutException, httpx.TransportError) as err:
            raise ZdebiasError(
                f"{self.url}/models: no answer ({type(err).__name__}); is the server up? "
                "Nothing was removed"
            ) from err
        if resp.status_code in (401, 403):
            raise ConfigError(
                f"{self.url}/models: the server refused the key (HTTP {resp.status_code}); "
                f"check ${self.prompt.api_key_env}. Nothing was removed"
            )

    def close(self) -> None:
        self._stop.set()  # requests waiting to retry give up; queued ones are cancelled
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def body(self, req: Prompt) -> dict[str, Any]:
        s = self.cfg
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.prompt.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": req.seed,
            "n": 1,
        }
        if s.top_k:
            body["top_k"] = s.top_k  # an extension (vLLM, llama.cpp, TGI); others ignore it
        if self.prompt.endpoint == "chat":
            body["messages"] = req.messages()
        else:
            body["prompt"] = req.text()
            body["stop"] = req.stop
        return body

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        wait = self.prompt.retry_backoff * 2**attempt
        if retry_after:
            try:
                wait = float(retry_after)
            except ValueError:
                pass
        self._stop.wait(min(max(wait, 0.0), self.MAX_WAIT))

    def request(self, req: Prompt) -> Answer:
        """One request, retried on 429/5xx/timeouts; a 4xx the client caused ends the run."""
        httpx = self.httpx
        path = "/chat/completions" if self.prompt.endpoint == "chat" else "/completions"
        body = self.body(req)
        started = time.perf_counter()
        last = ""
        attempts = 0
        for attempt in range(self.prompt.max_retries + 1):
            if self._stop.is_set():
                break
            attempts = attempt + 1
            retry_after = None
            try:
                resp = self.client.post(self.url + path, json=body)
            except httpx.TimeoutException:
                last = "timeout"
            except httpx.TransportError as err:
                last = f"connection: {type(err).__name__}"
            else:
                code = resp.status_code
                if code == 200:
                    answer = self._answer(resp)
                    answer.attempts, answer.seconds = attempts, time.perf_counter() - started
                    return answer
                if code in self.RETRY_STATUS or code >= 500:
                    last = f"HTTP {code}"
                    retry_after = resp.headers.get("retry-after")
                else:
                    raise ConfigError(
                        f"{self.url}{path}: the server refused the request (HTTP {code}: "
                        f"{_short(resp.text)}); check --generator (the served model name), "
                        f"--base-url and the key in ${self.prompt.api_key_env}"
                    )
            if attempt < self.prompt.max_retries:
                self._wait(attempt, retry_after)
        return Answer(
            None, attempts=attempts, seconds=time.perf_counter() - started, error=last or "stopped"
        )

    def _answer(self, resp: Any) -> Answer:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = (
                choice["message"]["content"] if self.prompt.endpoint == "chat" else choice["text"]
            )
            if not isinstance(text, str | None):
                raise TypeError(type(text).__name__)
        except (ValueError, KeyError, IndexError, TypeError) as err:
            return Answer(None, error=f"bad_response: {type(err).__name__}")
        usage = data.get("usage") or {}
        return Answer(
            text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            extra={"fingerprint": data.get("system_fingerprint")}
            if data.get("system_fingerprint")
            else {},
        )

    def run(self, requests: Sequence[Prompt], round_seed: int) -> list[Answer]:
        """Answers in request order (``concurrency`` requests in flight)."""
        futures = [self.pool.submit(self.request, r) for r in requests]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _short(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class LocalChatBackend:
    """An instruct model in-process: its chat template, one seeded batched ``generate``."""

    def __init__(self, model: str, cfg: SampleSettings, prompt: ClientSettings) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from zdebias.models.resolve import resolve_model

        self.torch = torch
        path = resolve_model(model)
        self.tok = AutoTokenizer.from_pretrained(path)
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        if prompt.endpoint == "chat" and not self.tok.chat_template:
            raise ConfigError(f"{model}: has no chat template; use --endpoint completions")
        self.device = model_device(cfg.device)
        self.model = AutoModelForCausalLM.from_pretrained(path).to(self.device).eval()  # type: ignore[arg-type]  # transformers: .to typed unbound (functools.wraps)
        self.cfg, self.prompt = cfg, prompt
        self.completions = prompt.endpoint == "completions"

    def close(self) -> None:
        pass

    def run(self, requests: Sequence[Prompt], round_seed: int) -> list[Answer]:
        torch, tok = self.torch, self.tok
        if self.prompt.endpoint == "chat":
            texts = [
                tok.apply_chat_template(r.messages(), tokenize=False, add_generation_prompt=True)
                for r in requests
            ]
        else:
            texts = [r.text() for r in requests]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        s = self.cfg
        started = time.perf_counter()
        torch.manual_seed(round_seed)
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                do_sample=True,
                top_p=s.top_p,
                top_k=s.top_k or None,
                temperature=s.temperature,
                max_new_tokens=self.prompt.max_tokens,
                pad_token_id=tok.pad_token_id,
            )
        seconds = (time.perf_counter() - started) / max(1, len(requests))
        width = enc["input_ids"].shape[1]
        stops = {tok.eos_token_id, tok.pad_token_id} - {None}
        answers = []
        for i, row in enumerate(out[:, width:].tolist()):
            end = next((j for j, t in enumerate(row) if t in stops), None)
            body = row if end is None else row[:end]
            # one sequence decodes to one string (transformers types it str | list[str])
            text = cast("str", tok.decode(body, skip_special_tokens=True))
            finish = "stop" if end is not None else "length"
            if self.completions:
                text = text.lstrip("\n")
                cut = min(
                    (k for k in (text.find(x) for x in requests[i].stop) if k >= 0), default=-1
                )
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            answers.append(
                Answer(
                    text,
                    finish_reason=finish,
                    prompt_tokens=int(enc["attention_mask"][i].sum()),
                    completion_tokens=len(body) + (end is not None),
                    seconds=seconds,
                )
            )
        return answers


#: the prompted backends by name (:mod:`zdebias.generation.backends`' catalogue)
PROMPT_BACKENDS = Backends(prompted=True)


# --------------------------------------------------------------------------- sampling


def _fingerprint(backend: str, model: str, premises: list[Record], examples: list[Record]) -> str:
    """The identity of a prompted run's inputs: model name, premises and examples."""
    h = hashlib.blake2b(digest_size=12)
    h.update(f"{backend}\x1f{model}\x1e".encode())
    if backend == "local":
        from zdebias.models.resolve import resolve_model

        folder = Path(resolve_model(model))
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*.safetensors")):
                h.update(f"{path.name}:{path.stat().st_size}".encode())
    for rows in (premises, examples):
        for r in rows:
            h.update("\x1f".join(sample_key(r)).encode("utf-8") + b"\x1e")
        h.update(b"\x1d")
    return h.hexdigest()


class RequestPlanner:
    """Which premise, label, examples and seed each request of a round gets."""

    def __init__(
        self,
        premises: list[Record],
        examples: list[Record],
        labels: Sequence[str],
        cfg: SampleSettings,
        prompt: PromptSettings,
        avoid: dict[str, list[str]],
    ) -> None:
        self.premises = list(premises)
        random.Random(cfg.seed).shuffle(self.premises)
        self.labels = list(labels)
        self.by_label: dict[str, list[Record]] = {lab: [] for lab in labels}
        for r in examples:
            if r.label in self.by_label and r.premise and r.hypothesis:
                self.by_label[r.label].append(r)
        self.cfg, self.prompt, self.avoid = cfg, prompt, avoid

    def plan(self, round_index: int, need: dict[str, int] | None) -> list[PromptRequest]:
        """The round's requests (``batch_size``, at most as many as samples are still
        needed): request g = round · batch_size + j asks for premise g // L and label g % L,
        or the next label still needed."""
        size, L = self.cfg.batch_size, len(self.labels)
        wanted = [lab for lab in self.labels if need is None or need.get(lab, 0) > 0]
        missing = sum(max(0, v) for v in need.values()) if need is not None else size
        out = []
        for j in range(min(size, missing)):
            g = round_index * size + j
            premise = self.premises[(g // L) % len(self.premises)]
            label = self.labels[g % L]
            if label not in wanted:
                label = wanted[g % len(wanted)]
            seed = request_seed(self.cfg.seed, round_index, j)
            pool = [r for r in self.by_label[label] if r.premise != premise.premise]
            k = min(self.prompt.few_shot, len(pool))
            shots = random.Random(seed).sample(pool, k) if k else []
            out.append(
                PromptRequest(
                    round_index,
                    j,
                    premise.premise or "",
                    premise.id,
                    label,
                    shots,
                    self.avoid.get(label, []),
                    seed,
                )
            )
        return out


def open_backend(model: str, cfg: SampleSettings, prompt: ClientSettings) -> Any:
    """The backend of ``cfg.backend``, reached: a server that answers, a model loaded."""
    engine = PROMPT_BACKENDS[cfg.backend](model, cfg, prompt)
    if hasattr(engine, "reach"):
        try:
            engine.reach()
        except BaseException:
            engine.close()
            raise
    return engine


def sample_prompted(
    model: str,
    out_dir: str | Path,
    cfg: SampleSettings,
    prompt: PromptSettings,
    *,
    premises: Sequence[Record],
    examples: Sequence[Record] | None = None,
    engine: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Prompted sampling of ``premises`` into ``out_dir`` (what ``sample_generator`` runs for
    ``backend`` ``openai`` / ``local``); see the module doc. ``engine``: a backend already
    opened (see :func:`open_backend`), closed at the end. Returns the sampling summary."""
    pool = list(examples) if examples is not None else list(premises)
    task = infer_task(pool)
    if not task.pair or any(r.premise is None for r in premises):
        raise ConfigError(
            "prompted sampling writes (premise, label, hypothesis) records; "
            "the premises and examples must be pair data"
        )
    unique = unique_premises(premises)
    labels = list(task.labels)
    avoid = biased_words(pool, labels, prompt.avoid_biased)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run = {**cfg.run_settings(), **prompt.run_settings(), "prompt_version": PROMPT_VERSION}
    folder = open_run(
        out,
        cfg,
        _fingerprint(cfg.backend, model, unique, pool),
        model,
        run=run,
        reasons=PARSE_REASONS,
        most=cfg.n,
    )
    state = folder.state
    state.update(
        backend=cfg.backend,
        model=model,
        prompting={
            "labels": labels,
            "n_premises": len(premises),
            "n_unique_premises": len(unique),
            "n_examples": len(pool),
            "avoid": avoid if prompt.avoid_biased else {},
        },
    )
    planner = RequestPlanner(unique, pool, labels, cfg, prompt, avoid)
    if state["n_written"] >= cfg.n and engine is not None:
        engine.close()
        engine = None
    elif state["n_written"] < cfg.n and engine is None:
        engine = PROMPT_BACKENDS[cfg.backend](model, cfg, prompt)
        if prompt.avoid_biased:
            log.info("avoiding per label: %s", json.dumps(avoid))

    def produce(round_index: int, need: dict[str, int] | None) -> RoundOutput:
        requests = planner.plan(round_index, need)
        answers = engine.run(requests, round_seed(cfg.seed, round_index))
        failed = [a.error for a in answers if a.error and not a.error.startswith("bad_response")]
        if answers and len(failed) == len(answers):
            where = getattr(engine, "url", cfg.backend)
            raise ZdebiasError(
                f"{where}: no answer to any request of round {round_index} after "
                f"{prompt.max_retries} retries ({failed[0]}); is the server up? "
                "Rerun the same command to resume"
            )
        candidates, rows = [], []
        for req, ans in zip(requests, answers, strict=True):
            if ans.error is not None:
                bad = ans.error.startswith("bad_response")
                parsed = ParsedSample(
                    req.premise, req.label, None, "bad_response" if bad else "request_failed"
                )
            else:
                parsed = parse_answer(
                    ans.text, req.premise, req.label, labels=labels, finish_reason=ans.finish_reason
                )
            meta = {
                "type": "generated",
                "generator": model,
                "backend": cfg.backend,
                "round": round_index,
                "request": req.index,
                "premise_id": req.premise_id,
            }
            text = ans.text if ans.text is not None else f"[{ans.error}]"
            candidates.append(Candidate(parsed, text if not parsed.ok else "", meta))
            rows.append(
                {
                    "round": round_index,
                    "request": req.index,
                    "label": req.label,
                    "seed": req.seed,
                    "attempts": ans.attempts,
                    "seconds": round(ans.seconds, 4),
                    "prompt_tokens": ans.prompt_tokens,
                    "completion_tokens": ans.completion_tokens,
                    "finish_reason": ans.finish_reason,
                    "error": ans.error,
                    **ans.extra,
                }
            )
        return RoundOutput(candidates, rows)

    def make_record(c: Candidate, index: int, round_index: int) -> Record:
        p = c.parsed
        return Record(
            id=f"prompt-s{cfg.seed}:{index}",
            label=p.label or "",
            premise=p.premise,
            hypothesis=p.hypothesis,
            meta=c.meta,
        )

    try:
        return run_rounds(
            folder,
            cfg,
            produce,
            make_record,
            progress=progress,
            quota=label_quota(cfg.n, labels),
            hint="check the model and the prompt (see dropped-*.jsonl)",
        )
    finally:
        if engine is not None:
            engine.close()


__all__ = [
    "LABEL_ASKS",
    "PARSE_REASONS",
    "PROMPT_BACKENDS",
    "LocalChatBackend",
    "OpenAIBackend",
    "Prompt",
    "PromptRequest",
    "RequestPlanner",
    "api_url",
    "biased_words",
    "parse_answer",
    "request_seed",
    "sample_prompted",
    "unique_premises",
]
