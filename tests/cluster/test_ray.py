"""The Ray executor on a local Ray cluster (2 CPUs): same bytes as one process, one assembly,
a killed worker's chunk redone, model stages on actors that load once, the CLI's --executor ray."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conceptforge.engine.runner import run_stage
from tests.cluster.conftest import BIN, JOB_ENV, REPO, published
from tests.engine import engine_stage

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'conceptforge[ray]' (the test extra has it)")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster whose workers can import tests.* (like a user's own stage module)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # ray.init replaces them
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}},
    )
    yield
    ray.shutdown()
    for sig, handler in handlers.items():  # later tests expect the interpreter's own handlers
        signal.signal(sig, handler)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ray-ref") / "out"
    run_stage(engine_stage.stage(40, chunk_size=4), out)
    return published(out)


def test_ray_tasks_give_the_bytes_of_one_process(ray_cluster, reference, tmp_path):
    from conceptforge.engine.ray_executor import RayExecutor

    out, log, assembly_log = tmp_path / "out", tmp_path / "made.log", tmp_path / "assembled.log"
    stage = engine_stage.stage(40, log=str(log), chunk_size=4, assembly_log=str(assembly_log))
    report = run_stage(stage, out, executor=RayExecutor())
    assert report.made == 40 and report.assembly.status == "assembled"
    assert published(out) == reference
    assert sorted(collections.Counter(log.read_text().split()).values()) == [1] * 40
    assert len(assembly_log.read_text().splitlines()) == 1
    # a rerun finds everything done: nothing goes to Ray, nothing is assembled again
    again = run_stage(stage, out, executor=RayExecutor())
    assert again.made == 0 and again.skipped == 40 and again.assembly.status == "already"


@pytest.mark.heavy
def test_ray_killed_worker_chunk_is_redone(ray_cluster, reference, tmp_path):
    from conceptforge.engine.ray_executor import RayExecutor
    from tests.cluster.ray_stage import killer_stage

    out, log, marker = tmp_path / "out", tmp_path / "made.log", tmp_path / "killed"
    stage = killer_stage(40, marker=str(marker), victim="item00013", log=str(log))
    report = run_stage(stage, out, executor=RayExecutor(max_retries=2))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker died, not the driver
    assert report.made == 40 and report.assembly.status == "assembled"
    assert published(out) == reference
    made = collections.Counter(log.read_text().split())
    # the victim's chunk (items 12-15) ran twice up to the kill; every item is in the dataset once
    assert len(made) == 40 and made["item00013"] == 1 and made["item00012"] in (1, 2)


def test_ray_model_stage_runs_on_actors_that_load_once(ray_cluster, reference, tmp_path):
    from conceptforge.engine.ray_executor import RayExecutor
    from tests.cluster.ray_stage import killer_stage

    out, log, marker, loads = tmp_path / "out", tmp_path / "made.log", tmp_path / "killed", tmp_path / "loads.log"
    stage = killer_stage(40, marker=str(marker), victim="item00021", log=str(log), load_log=str(loads))
    report = run_stage(stage, out, executor=RayExecutor(num_workers=2, max_retries=2))
    assert report.made == 40 and published(out) == reference
    pids = loads.read_text().split()
    # two actors loaded once each for 10 chunks; the killed one was restarted and loaded once more
    assert len(pids) == 3 and len(set(pids)) == 3 and marker.read_text().strip() in pids[:2]


@pytest.mark.heavy
def test_ray_cli_generate_sub_is_byte_identical(tmp_path, random_flux_seed0):
    """`conceptforge generate sub --executor ray` (a local cluster from ray.init()) on tiny FLUX."""
    import shutil

    from tests.sub.conftest import write_mini_cub
    from tests.sub.sub_helpers import TINY_FLUX_ARGS, write_candidate_spec

    model = shutil.copytree(random_flux_seed0, tmp_path / "flux", dirs_exist_ok=True)
    cub = write_mini_cub(tmp_path / "cub")
    spec = write_candidate_spec(tmp_path / "spec.json")
    common = ["generate", "sub", "--cub-dir", str(cub), "--model", str(model), "--candidate-spec", str(spec)]
    common += ["--images-per-pair", "2", *TINY_FLUX_ARGS, "--chunk-size", "2"]
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))} | JOB_ENV | {"RAY_NUM_CPUS": "2"}
    )
    for name in ("local", "ray"):  # the same relative --out: the card records the command line
        (tmp_path / name).mkdir()

    def generate(folder: str, *extra: str) -> subprocess.CompletedProcess:
        argv = [f"{BIN}/conceptforge", *common, "--out", "out", *extra]
        done = subprocess.run(argv, env=env, cwd=tmp_path / folder, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    # the two runs are independent: side by side, the local one overlaps Ray's start-up (daemons,
    # actors), which is mostly waiting
    with ThreadPoolExecutor(max_workers=2) as pool:
        local = pool.submit(generate, "local")
        on_ray = pool.submit(generate, "ray", "--executor", "ray")
        local.result()
        on_ray = on_ray.result()
    assert "Ray: 2 actor(s) hold the model" in on_ray.stderr, on_ray.stderr[-3000:]
    assert published(tmp_path / "ray" / "out") == published(tmp_path / "local" / "out")


_CONNECT = """
import sys
import conceptforge.engine.ray_executor as ray_executor
from conceptforge.cli import run_cli

ray_executor.RAY_CONNECT_TIMEOUT = float(sys.argv[2])


def main(argv):
    print("connecting", flush=True)
    ray_executor.RayExecutor(address=argv[0])._ray()


sys.exit(run_cli(main, [sys.argv[1]]))
"""


def _connect(address: str, *, limit: float = 3.0) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | JOB_ENV
    return subprocess.Popen(
        [f"{BIN}/python", "-c", _CONNECT, address, str(limit)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _last_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    return stderr.strip().splitlines()[-1]


@pytest.mark.heavy
def test_an_unusable_ray_address_is_one_line_not_minutes_of_retries(tmp_path):
    """Issue 32: ray.init retried an unreachable --ray-address for minutes, deaf to SIGTERM."""
    import threading

    from tests.core.test_external_errors import MuteServer, _closed_port

    closed = _connect(f"127.0.0.1:{_closed_port()}")
    _, err = closed.communicate(timeout=600)
    assert closed.returncode == 2 and _last_error_line(err).startswith("error: --ray-address 127.0.0.1:"), err[-3000:]
    assert "no Ray cluster answers" in err

    # A port that accepts and never speaks Ray's protocol: bounded by the connect limit. Ray dials the
    # node's own address for 127.0.0.1, so the mute server listens on every interface.
    mute = MuteServer(host="0.0.0.0")
    try:
        stuck = _connect(f"127.0.0.1:{mute.port}")
        _, err = stuck.communicate(timeout=600)
        assert stuck.returncode == 2, err[-3000:]
        assert "did not accept the connection within 3 s" in _last_error_line(err)

        # ... and SIGTERM while Ray waits stops the command at once (one line, 143), not after the retries.
        waiting = _connect(f"127.0.0.1:{mute.port}", limit=600)
        assert waiting.stdout.readline().strip() == "connecting"
        threading.Event().wait(1.0)  # inside ray.init (the signal arrives in either case)
        waiting.send_signal(signal.SIGTERM)
        _, err = waiting.communicate(timeout=600)
        assert waiting.returncode == 143 and _last_error_line(err).startswith("interrupted by SIGTERM"), err[-3000:]
    finally:
        mute.close()


def test_ray_client_addresses_need_the_client_extra():
    from ray._private.utils import get_ray_client_dependency_error

    from conceptforge.engine.ray_executor import check_address
    from conceptforge.errors import DependencyMissingError, InvalidArgumentError

    if get_ray_client_dependency_error() is None:
        check_address("ray://head:10001")
    else:
        with pytest.raises(DependencyMissingError, match=r"pip install 'ray\[client\]'"):
            check_address("ray://head:10001")
    for bad in ("http://head:1", "head", "head:port"):
        with pytest.raises(InvalidArgumentError, match="expected HOST:PORT"):
            check_address(bad)
    for good in (None, "auto", "local", "10.0.0.1:6379", "[::1]:6379"):
        check_address(good)


def test_an_unreachable_cluster_leaves_no_run_folder(tmp_path):
    """The cluster is joined before the run writes anything: a refused --ray-address left OUT/.work.

    In a process of its own: this module's tests share a Ray session, which a RayExecutor in this
    process would join instead of the address under test."""
    from tests.core.test_external_errors import _closed_port

    out = tmp_path / "out"
    code = (
        "import sys\n"
        "from conceptforge.engine.ray_executor import RayExecutor\n"
        "from conceptforge.engine.runner import run_stage\n"
        "from conceptforge.errors import ClusterError\n"
        "from tests.engine import engine_stage\n"
        "try:\n"
        "    run_stage(engine_stage.stage(4, chunk_size=2), sys.argv[1], executor=RayExecutor(address=sys.argv[2]))\n"
        "except ClusterError as error:\n"
        "    print(error)\n"
        "    sys.exit(3)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | JOB_ENV
    result = subprocess.run(
        [f"{BIN}/python", "-c", code, str(out), f"127.0.0.1:{_closed_port()}"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 3 and "no Ray cluster answers" in result.stdout, result.stderr[-3000:]
    assert not out.exists()
