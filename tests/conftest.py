"""Test-wide settings: no telemetry, an isolated Hugging Face cache, deterministic threads."""

import gc
import os
import tempfile

import pytest

# Set before transformers / huggingface_hub are imported by any test module.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="relrep-hf-test-home-")
# pytest-xdist runs one worker per core (`-n auto` in pyproject.toml): the cores are shared
# among them, or each worker's BLAS would start a thread per core and they would fight.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))


# What a test costs, roughly, for ordering the files (seconds): a test marked slow takes more
# than a few seconds (20-130 s for the longest), an unmarked one well under one, a doctest less.
_SLOW_WEIGHT, _TEST_WEIGHT, _DOCTEST_WEIGHT = 10.0, 0.2, 0.02


def _weight(item) -> float:
    if item.get_closest_marker("slow") is not None:
        return _SLOW_WEIGHT
    return _DOCTEST_WEIGHT if type(item).__name__ == "DoctestItem" else _TEST_WEIGHT


@pytest.hookimpl(trylast=True)  # after ``-m`` / ``-k`` deselected: order what runs
def pytest_collection_modifyitems(session, config, items):
    """The files with the most slow tests first, each file's tests kept together and in their
    order. xdist's ``--dist loadfile`` hands whole files to the workers in collection order
    (``--no-loadscope-reorder`` in pyproject.toml; its default order is by number of tests):
    the longest work first, so that no worker starts a long file while the other is done (the
    longest-first rule of scheduling). Module-scoped fixtures and tests that read what an earlier
    test of their file wrote see the order they always did."""
    files: dict = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    cost = {path: sum(_weight(item) for item in group) for path, group in files.items()}
    ordered = sorted(files, key=lambda path: -cost[path])  # stable: ties keep their order
    _RAY_FILES.update(item.path for item in items if "ray_cluster" in item.fixturenames)
    ray_files = [path for path in ordered if path in _RAY_FILES]
    if ray_files:  # the Ray files one after another: a worker that runs both starts Ray once
        first = ordered.index(ray_files[0])
        ordered = ordered[:first] + ray_files + [p for p in ordered[first:] if p not in _RAY_FILES]
    items[:] = [item for path in ordered for item in files[path]]


def pytest_collection_finish(session):
    """Freeze the objects alive after collection (the imported modules of torch, transformers,
    datasets, ...: about half a million) out of the cyclic garbage collector, and collect
    automatically only every 100,000 new container objects, as the CLI's long commands and the
    scripts do (`settle_garbage_collector`, whose docstring has the figures). transformers'
    Trainer runs ``gc.collect()`` at the start of every ``train()``, and each full collection
    walked all of them: 0.83 s each, 80 of them in the multilingual smoke run (113 s, 48 s
    frozen, measured); parsing a GGUF vocabulary triggered 94 automatic full collections, 15 s
    of the CLI main job's 108 s (2.7 s after). Explicit collections are unchanged, and each test
    module ends with one (`pytest_runtest_teardown`), so its cycles do not pile up."""
    from relrep_hf.commands.arguments import settle_garbage_collector

    settle_garbage_collector()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A full collection once a test module is done (after its fixtures' teardown): with the
    thresholds of `pytest_collection_finish`, the cycles it left would otherwise wait long. The
    `ray_cluster` stops there too when the next module uses none."""
    yield
    if nextitem is None or nextitem.path != item.path:
        if _RAY and (nextitem is None or nextitem.path not in _RAY_FILES):
            _stop_ray()
        gc.collect()


@pytest.fixture
def one_torch_thread():
    """One intra-op thread while a test runs, restored afterwards (``pytestmark =
    pytest.mark.usefixtures("one_torch_thread")``). For tiny models: on a shared 2-core machine,
    two OpenMP threads competing with other processes made the multilingual smoke run 13x slower
    (99 s against 7.5 s, measured)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _devices() -> list:
    """``cpu`` everywhere, and ``cuda`` where a CUDA device is (skipped elsewhere, with its reason)."""
    import torch

    no_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
    return ["cpu", pytest.param("cuda", marks=no_cuda)]


@pytest.fixture(params=_devices())
def device(request):
    """The device a test's tensors live on: every entry point is tested on the CPU in CI and
    on CUDA where a GPU is, by the same test body, so the two can never drift."""
    import torch

    return torch.device(request.param)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """One real PostgreSQL with pgvector (pgserver) for the session, shared by every test file
    that asks for it (the database stores, rollback, store safety): its URI. Defined once here,
    not per file: a session fixture re-exported by several test modules is one fixture per
    module, and each started its own server (three a run; one start: 1.5 s of CPU, 9 s at a
    load of 22)."""
    from tests.fixtures import store_writers

    server = store_writers.postgres(tmp_path_factory.mktemp("pg"))
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


# The local Ray cluster's ``ray`` module while one runs in this process (`ray_cluster`), and the
# test files that use it (found at collection): it is stopped after the last of a run of them.
_RAY: dict = {}
_RAY_FILES: set = set()


@pytest.fixture
def ray_cluster():
    """A local Ray cluster (2 CPUs): the ``ray`` module, initialised. Started once for every
    test file that asks for it in a row (each xdist worker starts its own), not once per file: a
    start is 15 s of wall at a load of 5 (the GCS, the raylet, the dashboard agent, prestarted
    workers). Stopped once the next test file uses none: idle, its processes took about 13% of a
    core. Tests that kill a driver run it as a child process connected to this cluster
    (``RAY_ADDRESS``: ``ray.get_runtime_context().gcs_address``)."""
    ray = pytest.importorskip("ray")
    if not _RAY:
        # workers at this process's priority: Ray's default niceness (15) starves them on a
        # busy machine shared with other test runs
        environment = pytest.MonkeyPatch()
        environment.setenv("RAY_worker_niceness", "0")
        # one actor reads the parquet footers of a Ray Data read (the tests' reads list at most
        # 8 files, one batch of footers): Ray Data asks for 32 actors a read, and starts worker
        # processes for them (about 1-3 CPU-s each) that read nothing. Measured on the migrated
        # and onboarding tests of test_ray_engine.py: 103 -> 76 CPU-s, every process counted
        environment.setenv("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", "1")
        # the log monitor (its lines go nowhere: log_to_driver=False) globs the log folder
        # every 5 s, not every 0.1 s: 1.47 -> 1.12 CPU-s for a 40-s idle cluster, 1.35 -> 1.08%
        # of a core over the dying-worker tests (12 CPU-s in a run of the three Ray files)
        environment.setenv("RAY_LOG_MONITOR_MANY_FILES_THRESHOLD", "0")
        environment.setenv("LOG_NAME_UPDATE_INTERVAL_S", "5")
        try:
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                object_store_memory=200 * 2**20,
                log_to_driver=False,
                configure_logging=False,
            )
        except BaseException:  # this test errors with Ray's own message; the next one tries again
            environment.undo()
            if ray.is_initialized():
                ray.shutdown()
            raise
        ray.data.DataContext.get_current().enable_progress_bars = False
        _RAY.update(environment=environment, ray=ray)
    return _RAY["ray"]


def _stop_ray() -> None:
    """Shut the `ray_cluster` down and restore the environment it changed."""
    _RAY.pop("ray").shutdown()
    _RAY.pop("environment").undo()
