"""A private single-node Slurm (munged + slurmctld + slurmd) for tests and benchmarks.

Why a real one: scale-out tests that only *set* ``SLURM_*`` variables never see what a real
scheduler sets (a resubmitted ``sbatch --array=1`` has ``SLURM_ARRAY_TASK_MIN=1``), nor real
``scancel``/``scontrol requeue`` signals. Debian's ``slurm-wlm`` (22.05) starts in a plain root
container in seconds. Everything lives in one folder of its own: ``slurm.conf`` (passed to
clients through ``SLURM_CONF``), free TCP ports, its own state/spool/pid/log files and its own
munge socket (``munged --socket``, ``AuthInfo=socket=...``), so it runs beside a system Slurm and
leaves nothing behind when stopped.

Use :func:`unavailable_reason` to skip where it cannot run (not root, packages missing) and
:func:`start_cluster` / :meth:`SlurmCluster.stop` (or ``with start_cluster(...) as cluster``).
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "srun")
PACKAGES = "slurm-wlm munge"
#: Job states after which a job never runs again (squeue forgets them after MinJobAge).
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}
#: Seconds after which a wait gives up: only a guard against a hung daemon, far beyond what any
#: test needs even on a loaded machine (the tests wait for conditions, not for times).
HANG_GUARD = 3600.0


def _find(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/sbin") / name) if p.exists()), None
    )


def unavailable_reason() -> str | None:
    """Why a private Slurm cannot start here (one line), or None when it can."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if _find(name) is None]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): `make test` installs {PACKAGES} as root with apt"
        )
    if os.geteuid() != 0:
        return "a private Slurm needs root (slurmd runs jobs as their user); run the Slurm tests as root"
    return None


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class SlurmCluster:
    """A running private Slurm: its folder, the environment its clients need, and its daemons."""

    root: Path
    node: str
    cpus: int
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Variables that point Slurm clients (sbatch, srun, ...) at this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The caller's environment without any Slurm job variables, pointed at this cluster."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
        return {**base, **self.env, **(extra or {})}

    def run(
        self, *command: str, env: Mapping[str, str] | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            list(command), env=self.client_env(env), capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def sbatch(
        self,
        script: str | os.PathLike[str],
        *options: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> str:
        """Submit ``script`` (a path) with extra sbatch options; returns the job id."""
        command = ["sbatch", "--parsable", *options, str(script)]
        result = subprocess.run(command, env=self.client_env(env), capture_output=True, text=True, timeout=60, cwd=cwd)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout.strip().split(";")[0]

    def states(self, job: str) -> dict[str, str]:
        """``{job id: state}`` of a job (every task of an array, ``123_4``), from ``scontrol``."""
        result = self.run("scontrol", "-o", "show", "job", job, check=False)
        states = {}
        for line in result.stdout.splitlines():
            job_id = re.search(r"\bJobId=(\d+)", line)
            array_job = re.search(r"\bArrayJobId=(\d+) ArrayTaskId=(\S+)", line)
            state = re.search(r"\bJobState=(\S+)", line)
            if job_id and state:
                key = f"{array_job.group(1)}_{array_job.group(2)}" if array_job else job_id.group(1)
                states[key] = state.group(1)
        return states

    def wait(self, job: str, *, timeout: float = HANG_GUARD, poll: float = 0.5) -> dict[str, str]:
        """Wait until every task of ``job`` is in a final state; returns their states.

        A wait for a condition, not a deadline: a loaded machine only makes it longer. ``timeout``
        guards against a hung daemon only (:data:`HANG_GUARD`).
        """
        deadline = time.monotonic() + timeout
        while True:
            states = self.states(job)
            if states and all(state in FINAL_STATES for state in states.values()):
                return states
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm job {job} did not finish in {timeout:.0f} s: {states}\n{self.log_tail()}")
            time.sleep(poll)

    def wait_for(
        self, job: str, wanted: Sequence[str], *, timeout: float = HANG_GUARD, poll: float = 0.2
    ) -> dict[str, str]:
        """Wait until some task of ``job`` is in one of the ``wanted`` states; fails at once when
        every task reached a final state without it (the condition can no longer be met)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states(job)
            if any(state in wanted for state in states.values()):
                return states
            if states and all(state in FINAL_STATES for state in states.values()):
                raise AssertionError(f"Slurm job {job} finished without reaching {wanted}: {states}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm job {job} never reached {wanted}: {states}")
            time.sleep(poll)

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for name in ("slurmctld", "slurmd"):
            path = self.root / "log" / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}.log\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    def stop(self, *, remove: bool = True) -> None:
        """Cancel what still runs here, stop the daemons (slurmd, slurmctld, munged; each by its own
        pid) and remove the folder. Jobs are cancelled first: their slurmstepd would outlive slurmd."""
        if self.processes.get("slurmctld") is not None and self.processes["slurmctld"].poll() is None:
            try:
                user = pwd.getpwuid(os.geteuid()).pw_name
                self.run("scancel", "--user", user, check=False, timeout=20)
                deadline = time.monotonic() + 20
                while (
                    self.run("squeue", "-h", "-o", "%i", check=False, timeout=20).stdout.strip()
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.3)
            except (OSError, subprocess.SubprocessError):
                logger.debug("could not cancel the remaining jobs", exc_info=True)
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _write_config(root: Path, node: str, cpus: int, ports: Sequence[int], munge_socket: Path) -> None:
    etc = root / "etc"
    etc.mkdir(parents=True)
    for name in ("state", "spool", "log", "run"):
        (root / name).mkdir()
    # slurmd checks the hardware against the node line; config_overrides lets a 2-core machine
    # offer more CPUs so an array x srun composition can run all at once (tasks are tiny).
    conf = f"""# private test cluster (conceptforge.testing.slurm)
ClusterName=cftest
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "run" / "slurmctld.pid"}
SlurmdPidFile={root / "run" / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
PlugStackConfig={etc / "plugstack.conf"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
InactiveLimit=0
SlurmctldDebug=info
SlurmdDebug=info
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""
    (etc / "slurm.conf").write_text(conf)
    # `disabled` is unknown to 22.05 (slurmd then refuses to start); autodetect + IgnoreSystemd works.
    (etc / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
    (etc / "plugstack.conf").write_text("")


def _start(name: str, command: list[str], root: Path, env: Mapping[str, str]) -> subprocess.Popen:
    log = open(root / "log" / f"{name}.out", "ab")
    try:
        return subprocess.Popen(
            command,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        log.close()


def _wait_until(check, what: str, timeout: float, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                out = (cluster.root / "log" / f"{name}.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(
                    f"{name} exited {process.returncode} while waiting for {what}:\n{out}\n{cluster.log_tail()}"
                )
        if time.monotonic() > deadline:
            raise TimeoutError(f"private Slurm: {what} not ready after {timeout:.0f} s\n{cluster.log_tail()}")
        time.sleep(0.2)


def start_cluster(*, cpus: int = 8, root: str | os.PathLike[str] | None = None, timeout: float = 60) -> SlurmCluster:
    """Start munged, slurmctld and slurmd with a private configuration; returns once the node is idle.

    ``cpus`` is what the node offers (more than the machine has is fine for tiny jobs).
    """
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    root = Path(tempfile.mkdtemp(prefix="cf-slurm-", dir=root))
    root.chmod(0o755)  # munged refuses sockets in group/world-writable folders
    node = socket.gethostname().split(".")[0]
    munge_socket = root / "run" / "munge.socket"
    _write_config(root, node, cpus, _free_ports(2), munge_socket)
    key = root / "etc" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster = SlurmCluster(root=root, node=node, cpus=cpus)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | cluster.env
    try:
        cluster.processes["munged"] = _start(
            "munged",
            [
                _find("munged"),
                "--foreground",
                "--force",
                f"--socket={munge_socket}",
                f"--key-file={key}",
                f"--pid-file={root / 'run' / 'munged.pid'}",
                f"--log-file={root / 'log' / 'munged.log'}",
                f"--seed-file={root / 'run' / 'munged.seed'}",
                "--num-threads=2",
            ],
            root,
            env,
        )
        _wait_until(munge_socket.exists, "munged socket", timeout, cluster)
        cluster.processes["slurmctld"] = _start(
            "slurmctld", [_find("slurmctld"), "-D", "-i", "-f", str(cluster.conf)], root, env
        )
        _wait_until(
            lambda: cluster.run("scontrol", "ping", check=False).stdout.count("UP") > 0, "slurmctld", timeout, cluster
        )
        cluster.processes["slurmd"] = _start(
            "slurmd", [_find("slurmd"), "-D", "-N", node, "-f", str(cluster.conf)], root, env
        )

        def node_idle() -> bool:
            state = cluster.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip().lower()
            return state.startswith(("idle", "mixed", "allocated"))

        _wait_until(node_idle, "node", timeout, cluster)
    except BaseException:
        cluster.stop(remove=False)
        raise
    logger.info("private Slurm up in %s (node %s, %d CPUs)", root, node, cpus)
    return cluster
