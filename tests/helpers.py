"""Shared helpers for tests that drive the real CLI, broker and Redis."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, TypeVar

import orjson
from confluent_kafka import Consumer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "services" / "reference" / "data" / "sample.jsonl"

T = TypeVar("T")


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("IVMSTREAM_LOG_LEVEL", "WARNING")
    return env


def ivm(*args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``ivmstream ARGS`` as a user would, in a child process."""
    proc = subprocess.run(
        [sys.executable, "-m", "ivmstream.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
        cwd=REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"ivmstream {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def start_command(
    command: str, *args: str, log: Path | None = None, append: bool = False
) -> subprocess.Popen[bytes]:
    """``ivmstream COMMAND ARGS`` in the background, its output in ``log`` (``append``: after a previous
    run's, as a restart after a kill keeps the killed run's lines)."""
    out = open(log, "ab" if append else "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", command, *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        cwd=REPO,
    )


def start_worker(*args: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    return start_command("run", *args, log=log)


def kill9(proc: subprocess.Popen[bytes], log: Path | None = None) -> None:
    """``kill -9`` the process, which must die of it (``log``: what it wrote, shown if not)."""
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, log.read_text() if log else proc.returncode


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    return proc.returncode


@contextmanager
def running_workers(
    commands: Sequence[Sequence[str]], logs: Sequence[Path]
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One ``ivmstream run`` worker per command for the ``with`` body; leaving it stops them all, and each
    must exit cleanly (their logs tell why not), even when the body failed."""
    workers = [start_worker(*args, log=log) for args, log in zip(commands, logs, strict=True)]
    try:
        yield workers
    finally:
        codes = [stop_worker(w) for w in workers]
        assert codes == [0] * len(workers), "\n".join(f"{log}:\n{log.read_text()}" for log in logs)


@contextmanager
def running_worker(args: Sequence[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One ``ivmstream run`` worker for the ``with`` body, which must exit cleanly when stopped."""
    with running_workers([args], [log]) as [worker]:
        yield worker


def catch_up_with_workers(
    args: Sequence[str],
    broker: Any,
    unique: str,
    tmp_path: Path,
    *,
    workers: int = 1,
    group: str = "g",
    timeout: float = 120.0,
) -> list[Any]:
    """Run ``workers`` copies of the worker ``args`` (logging to ``tmp_path / "w{i}.log"``) until group
    ``{unique}-{group}`` has consumed all of ``{unique}.updates``, then stop them cleanly; the group's
    progress then, per partition."""
    from ivmstream.runtime.progress import wait_caught_up

    with running_workers([args] * workers, [tmp_path / f"w{i}.log" for i in range(workers)]):
        return wait_caught_up(broker.bootstrap, f"{unique}-{group}", f"{unique}.updates", timeout=timeout)


def kill9_mid_stream_then_catch_up(
    args: Sequence[str],
    broker: Any,
    unique: str,
    tmp_path: Path,
    *,
    feed: tuple[Path, str, float],
    kills: int = 2,
    alive_for: float = 1.3,
    before_kill: Callable[[], T] = lambda: None,
) -> list[T]:
    """A crash run paced by the clock (every service gets ``ivmstream.testing.check_kill9_restart``, which
    waits for checkpoints instead): while ``feed`` (file, key field, seconds) trickles into
    ``{unique}.updates``, start a worker and ``kill -9`` it ``kills`` times (twice unless told),
    ``alive_for`` seconds after each start (1.3 s unless told); then run one until group ``{unique}-g``
    has caught up and stop it cleanly (all log to ``tmp_path / "w.log"``). Returns what ``before_kill``
    saw just before each kill, so a test can show that the kills landed mid-stream."""
    from ivmstream.runtime.progress import wait_caught_up

    topic, group, log = f"{unique}.updates", f"{unique}-g", tmp_path / "w.log"
    source, key_field, seconds = feed
    feeder = threading.Thread(target=trickle, args=(broker.bootstrap, topic, source, key_field, seconds))
    feeder.start()
    seen: list[T] = []
    try:
        for _ in range(kills):
            worker = start_worker(*args, log=log)
            time.sleep(alive_for)
            seen.append(before_kill())
            kill9(worker, log)
        feeder.join()
        with running_worker(args, log):
            wait_caught_up(broker.bootstrap, group, topic, timeout=120)
    finally:
        feeder.join()
    return seen


def write_file(tmp_path: Path, name: str, data: str | bytes) -> Path:
    """An input file with exactly these bytes (text is written as UTF-8, line endings untouched)."""
    p = tmp_path / name
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8", newline="")
    else:
        p.write_bytes(data)
    return p


def write_config(path: Path, **config: Any) -> Path:
    path.write_text(json.dumps(config))
    return path


def stream_config(path: Path, unique: str, **options: Any) -> Path:
    """A config on the test's own topics (``{unique}.updates`` in, ``{unique}.results`` out and
    ``{unique}.dlq``), so tests sharing the session broker never meet; ``options`` add settings or
    override those names."""
    topics = {
        "input_topic": f"{unique}.updates",
        "output_topic": f"{unique}.results",
        "dlq_topic": f"{unique}.dlq",
    }
    return write_config(path, **{**topics, **options})


def triangles_graph_config(tmp_path: Path, unique: str, **options: Any) -> Path:
    """``tmp_path / "tri.json"``: the triangles view the streaming tests run over the sample graphs
    (graph mode, IVM^eps, keyed by graph) on the test's own topics; ``options`` add settings."""
    return stream_config(
        tmp_path / "tri.json", unique, mode="graph", strategy="ivm-eps", key_field="graph", **options
    )


def replay_result(
    config: Path, input_path: Path, service: str = "reference", extra: Sequence[str] = ()
) -> dict[str, Any]:
    """The final summary line of ``ivmstream replay`` (``extra`` adds flags such as ``--format``)."""
    out = ivm("replay", service, "--config", str(config), "--input", str(input_path), *extra)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_args(
    service: str,
    bootstrap: str,
    config: Path,
    *,
    group: str | None = None,
    state_dir: Path | None = None,
    redis: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The arguments after ``ivmstream run``: every worker test passes the same flags, each only if given."""
    args = [service, "--bootstrap", bootstrap, "--config", str(config)]
    if group is not None:
        args += ["--group", group]
    if state_dir is not None:
        args += ["--state-dir", str(state_dir)]
    if redis is not None:
        args += ["--redis", redis]
    return [*args, *extra]


def worker_args(
    service: str,
    broker: Any,
    redis_server: Any,
    unique: str,
    tmp_path: Path,
    config: Path,
    group: str = "g",
    extra: Sequence[str] = (),
) -> list[str]:
    """``ivmstream run SERVICE`` as the worker tests run it: in group ``{unique}-{group}`` on the session's
    broker, its state under ``tmp_path / "s"``, its results published to the session's Redis."""
    return run_args(
        service,
        broker.bootstrap,
        config,
        group=f"{unique}-{group}",
        state_dir=tmp_path / "s",
        redis=redis_server.url,
        extra=extra,
    )


def ivm_produce(
    bootstrap: str, topic: str, path: Path, key_field: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``ivmstream produce`` of a file, the way a user feeds a topic."""
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--input", str(path)]
    if key_field is not None:
        args += ["--key-field", key_field]
    return ivm(*args, check=check)


def ivm_in_process(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ivmstream ARGS`` through the CLI's entry point in this process: the same parsing, checks, output
    and exit status, but a Spark command runs on the tests' SparkSession (the CLI takes the active one)
    instead of starting a JVM of its own. The child-process path is run by the reference service's
    bootstrap test and by ``ivmstream demo``."""
    from ivmstream.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    proc = subprocess.CompletedProcess(["ivmstream", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"ivmstream {' '.join(args)} failed ({code}):\n{proc.stderr}")
    return proc


def ivm_bootstrap(
    service: str,
    config: Path,
    snapshot: Path,
    *,
    bootstrap: str,
    state_dir: Path,
    group: str,
    in_process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``ivmstream bootstrap`` of a snapshot into RocksDB state at the topic's current end, as ``run`` with
    the same group and state dir resumes it; one Spark core, as the tests share the machine. With
    ``in_process`` the command runs on the tests' SparkSession (:func:`ivm_in_process`)."""
    if in_process:
        return ivm_in_process(
            *("bootstrap", service, "--config", str(config), "--snapshot", str(snapshot)),
            *("--bootstrap", bootstrap, "--from-offsets", "latest", "--state-dir", str(state_dir)),
            *("--group", group),
        )
    return ivm(
        "bootstrap",
        service,
        "--config",
        str(config),
        "--snapshot",
        str(snapshot),
        "--bootstrap",
        bootstrap,
        "--from-offsets",
        "latest",
        "--state-dir",
        str(state_dir),
        "--group",
        group,
        "--master",
        "local[1]",
        timeout=300,
    )


def ivm_reconcile(
    service: str, config: Path, *, bootstrap: str, redis: str, report: Path, snapshot: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``ivmstream reconcile`` (in this process, on the tests' SparkSession): Spark recomputes the views
    from the topic (on top of ``snapshot``)."""
    args = ["reconcile", service, "--config", str(config), "--bootstrap", bootstrap, "--redis", redis]
    if snapshot is not None:
        args += ["--snapshot", str(snapshot)]
    return ivm_in_process(*args, "--report", str(report))


def published_results(redis_url: str, output_topic: str, service: str = "reference") -> dict[str, Any]:
    """Every key's latest published result, as ``{key: result}``."""
    out = json.loads(ivm("results", service, "--redis", redis_url, "--topic", output_topic).stdout)
    if "result" in out and "key" in out:  # a single key prints its record
        out = {out["key"]: out}
    return {k: rec["result"] for k, rec in out.items()}


def read_topic(bootstrap: str, topic: str, expect: int | None = None, timeout: float = 30.0) -> list[Any]:
    """All records of a topic (every partition, from the start) as confluent-kafka messages."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign(tps)
        msgs: list[Any] = []
        deadline = time.monotonic() + timeout
        pos = {p: 0 for p in ends}
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    msgs.append(m)
                    pos[m.partition()] = m.offset() + 1
        if expect is not None and len(msgs) < expect:
            raise AssertionError(f"read {len(msgs)} records from {topic}, expected {expect}")
        return msgs
    finally:
        consumer.close()


def headers(msg: Any) -> dict[str, str]:
    return {k: v.decode() for k, v in (msg.headers() or [])}


def loads(value: bytes) -> Any:
    return orjson.loads(value)


def trickle(bootstrap: str, topic: str, path: Path, key_field: str | None, seconds: float) -> None:
    """Produce a file's events spread over ``seconds``, so a worker is mid-stream for a while."""
    from ivmstream.events import read_source
    from ivmstream.runtime.produce import produce_records

    records = list(read_source(path, key_field=key_field))
    chunks = max(1, int(seconds / 0.05))
    step = max(1, len(records) // chunks)

    def paced() -> Iterator[Any]:
        # one producer for the whole file (a client per chunk costs more than the pause between them)
        for i, record in enumerate(records):
            if seconds and i and i % step == 0:
                time.sleep(0.05)
            yield record

    report = produce_records(bootstrap, topic, paced())
    assert report.sent == len(records) and not report.failures


def offline_results(config_path: Path, input_path: Path, service: str = "reference") -> dict[str, Any]:
    """What replay computes for a file, in-process."""
    from ivmstream.config import load_config
    from ivmstream.events import read_source
    from ivmstream.replay import replay_all
    from ivmstream.service import load_service

    svc = load_service(service)
    cfg = load_config(svc, config_path)
    return replay_all(svc, cfg, read_source(input_path, key_field=cfg.key_field)).result()


def spark_bootstrap(
    spark: Any,
    service: Any,
    config: Any,
    snapshot: Path,
    *,
    group: str,
    state_dir: Path,
    bootstrap: str,
    **options: Any,
) -> Any:
    """Spark's bootstrap (``run_bootstrap``) of ``snapshot`` into ``group``'s RocksDB state under
    ``state_dir``, which ``rocksdb_snapshots`` reads back and a worker of that group resumes from."""
    from ivmstream.spark.runs import run_bootstrap
    from ivmstream.state import open_store

    store = open_store("rocksdb", group, state_dir=state_dir)
    return run_bootstrap(spark, service, config, str(snapshot), store, bootstrap_servers=bootstrap, **options)


def rocksdb_snapshots(
    group: str, state_dir: Path, topic: str, partitions: int, new_engine: Callable[[], Any] | None = None
) -> dict[str, bytes]:
    """Every key's engine snapshot in a RocksDB state dir over the topic's partitions, as bootstrap wrote;
    keys stored as entries are rebuilt in ``new_engine()`` and snapshotted (an error without it)."""
    from ivmstream.state import open_store

    store = open_store("rocksdb", group, state_dir=state_dir)
    out: dict[str, bytes] = {}
    try:
        for p in range(partitions):
            cp = store.load(topic, p)
            out.update(cp.snapshots)
            for key, entries in cp.entries.items():
                if new_engine is None:
                    raise AssertionError(f"key {key!r} is stored as entries: pass new_engine to rebuild it")
                engine = new_engine()
                engine.restore_entries(entries)
                out[key] = engine.snapshot()
        return out
    finally:
        store.close()


def bench_markdown(script: str, *args: str) -> str:
    """What ``bench/SCRIPT --markdown ARGS`` prints (it must succeed): the tables the docs hold."""
    return subprocess.run(
        [sys.executable, f"bench/{script}", "--markdown", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=cli_env(),
    ).stdout


def generated_block(doc: Path, script: str) -> str:
    """The part of ``doc`` between its markers for ``bench/SCRIPT --markdown``'s tables (each once)."""
    begin = f"<!-- tables: bench/{script} --markdown (begin) -->"
    end = f"<!-- tables: bench/{script} --markdown (end) -->"
    text = doc.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1, f"{doc}: the generated block's markers"
    return text.split(begin, 1)[1].split(end, 1)[0]


def assert_doc_block_is_printed(doc: Path, script: str, *args: str) -> None:
    """``doc``'s generated block equals what ``bench/SCRIPT --markdown ARGS`` prints from the stored run,
    so a re-run of the benchmark cannot leave the page contradicting it."""
    printed = bench_markdown(script, *args)
    command = " ".join([".venv/bin/python", f"bench/{script}", "--markdown", *(_in_repo(a) for a in args)])
    assert generated_block(doc, script).strip("\n") == printed.strip("\n"), (
        f"{_in_repo(str(doc))} is out of date: replace the block between the markers with `{command}`"
    )


def _in_repo(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (for a message one can paste)."""
    return path.removeprefix(f"{REPO}/")


def run_bench(script: str, out: Path, *args: str, timeout: float) -> dict[str, Any]:
    """A ``--quick`` run of a ``make bench`` script, which must succeed; its JSON report (``OUT.json``)."""
    proc = subprocess.run(
        [sys.executable, f"bench/{script}", "--quick", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.with_suffix(".json").read_text())


def run_worker_to_end(
    service, config, bootstrap: str, store, group: str, redis_client=None
) -> dict[str, Any]:
    """Run an in-process Worker until it has consumed everything in its topic now; its engines' results."""
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.progress import group_progress

    ends = {p.partition: p.high for p in group_progress(bootstrap, group, config.input_topic)}
    worker = Worker(service, config, KafkaClients(bootstrap), store, group=group, redis_client=redis_client)
    results: dict[str, Any] = {}

    def done(w: Worker) -> bool:
        if all((w.positions().get(p) or 0) == hi for p, hi in ends.items()):
            results.update(w.results())
            return True
        return False

    worker.run(until=done)
    return results
