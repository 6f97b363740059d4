"""Forked worker processes, each serving one object's methods (:class:`Workers`): the parent
sends a method name and its arguments to every worker at once and gathers the results (a
generator method's items stream back as they come), or the first worker's error.

Forked, so a worker starts with what the parent holds (nothing crosses a pipe but the calls
and their results); the z-filter's workers are
:class:`~zdebias.stats.execution.shard.Shard` objects.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import traceback
from collections.abc import Sequence
from typing import Any, cast

from zdebias.data.process import end_with_parent
from zdebias.errors import ZdebiasError


class Workers:
    """One forked process per object of ``served``, running the methods it is sent."""

    def __init__(self, served: Sequence[Any]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for obj in served:
            parent, child = ctx.Pipe()
            # the worker closes the parent's ends it inherits (its own, its elder siblings'),
            # and ends when this process does (data.process.end_with_parent)
            others = (parent, *self.conns)
            proc = ctx.Process(target=_serve, args=(child, obj, os.getpid(), others), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run ``method`` in every worker at once (``args[i]`` for worker i); their results in
        order as ``(value, parts)``, or the first worker's error (the earliest in the file)
        raised."""
        self.send(method, args)
        return self.gather()

    def send(self, method: str, args: Sequence[tuple[Any, ...]]) -> None:
        """Start ``method`` in every worker (``args[i]`` for worker i)."""
        for conn, a in zip(self.conns, args, strict=True):
            conn.send((method, a))

    def gather(self) -> list[Any]:
        """The results of what :meth:`send` started, in order, each as ``(value, parts)`` (a
        generator method's returned value and items); the first error raised."""
        from multiprocessing.connection import Connection, wait

        parts: list[list[Any]] = [[] for _ in self.conns]
        replies: list[Any] = [None] * len(self.conns)
        pending = {conn: i for i, conn in enumerate(self.conns)}
        while pending:
            # wait gives back the connections it was given
            for conn in cast("list[Connection]", wait(list(pending))):
                i = pending[conn]
                try:
                    kind, value = conn.recv()
                except EOFError:
                    proc = self.procs[i]
                    proc.join(timeout=5)
                    killed = " (killed: out of memory?)" if proc.exitcode == -9 else ""
                    raise ZdebiasError(
                        f"a z-filter worker process (pid {proc.pid}) died with exit code "
                        f"{proc.exitcode}{killed}; rerun with --num-proc 1 for one process"
                    ) from None
                if kind == "part":
                    parts[i].append(value)
                else:
                    replies[i] = (kind, value)
                    del pending[conn]
        for kind, value in replies:
            if kind == "error":
                raise value
        return [(value, got) for (_, value), got in zip(replies, parts, strict=True)]

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: ask them to end and wait; ``kill``: end them now (after an
        error, when they may still be busy)."""
        if kill:
            for proc in self.procs:
                proc.kill()
        for conn in self.conns:
            try:
                conn.send(None)
                conn.close()
            except (OSError, BrokenPipeError):
                pass
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _serve(conn: Any, served: Any, parent: int, others: Sequence[Any]) -> None:
    """A worker's loop: run each ``(method, args)`` received, send back ``("ok", value)`` or
    ``("error", exception)`` (a generator's items first, each as ``("part", item)``); stop on
    None, on the pipe's end, or with process ``parent`` (``others``: the inherited connections
    it does not use, closed first)."""
    end_with_parent(parent, close=others)
    try:
        while True:
            message = conn.recv()
            if message is None:
                break
            method, args = message
            try:
                value = getattr(served, method)(*args)
                if inspect.isgenerator(value):  # parts as they come, then what it returns
                    while True:
                        try:
                            part = next(value)
                        except StopIteration as stop:
                            value = stop.value
                            break
                        conn.send(("part", part))
                reply: tuple[str, Any] = ("ok", value)
            except BaseException as err:  # sent to the parent, which raises it
                reply = ("error", _picklable(err))
            conn.send(reply)
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        conn.close()


def _picklable(err: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        text = "".join(traceback.format_exception(err))
        return RuntimeError(f"a z-filter worker failed:\n{text}")


__all__ = ["Workers"]
