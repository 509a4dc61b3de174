"""Other libraries' environment errors as one line; the offline probe; each warning once.

Before: no credentials or a dead endpoint for ``s3://`` (generate, status, assemble), an
unreachable Hub or a mistyped model path (evaluate) ended in tracebacks, and without
``HF_HUB_OFFLINE=1`` an offline run spent 25 s to 5 minutes in doubled retry warnings first.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.errors import DataFormatError, HubError, StoreError, WeightsUnavailableError
from conceptforge.external_errors import go_offline_if_unreachable, probe_hub, translate

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _raised(make):
    try:
        make()
    except Exception as error:  # with its real __cause__/__context__
        return error
    raise AssertionError("nothing raised")


def test_known_environment_errors_become_one_line_kinds():
    botocore_errors = pytest.importorskip("botocore.exceptions", reason="s3fs (the test extra) brings botocore")
    import huggingface_hub.errors
    import pyarrow as pa
    from huggingface_hub.utils import validate_repo_id

    cases = [
        (
            botocore_errors.NoCredentialsError(),
            StoreError,
            "no credentials for the object store (Unable to locate credentials)",
        ),
        (
            botocore_errors.EndpointConnectionError(endpoint_url="http://127.0.0.1:9/b"),
            StoreError,
            'cannot reach the object store (Could not connect to the endpoint URL: "http://127.0.0.1:9/b")',
        ),
        (
            huggingface_hub.errors.LocalEntryNotFoundError("no cached model.safetensors"),
            WeightsUnavailableError,
            "not in the local cache and the Hub cannot be asked (no cached model.safetensors; ",
        ),
        (
            _raised(lambda: validate_repo_id("./typo-model")),
            WeightsUnavailableError,
            "neither an existing local folder nor a valid Hub id",
        ),
        (
            pa.ArrowInvalid("Parquet magic bytes not found in footer."),
            DataFormatError,
            "a parquet file is damaged or not parquet (Parquet magic bytes not found in footer.)",
        ),
        (
            OSError("typo/model is not a local folder and is not a valid model identifier listed on the Hub"),
            WeightsUnavailableError,
            "cannot load the model: typo/model is not a local folder",
        ),
    ]
    for error, kind, start in cases:
        known = translate(error)
        assert isinstance(known, kind) and str(known).startswith(start), (error, known)
        assert "\n" not in str(known)


def test_the_cause_chain_is_searched_and_bugs_stay_bugs():
    botocore_errors = pytest.importorskip("botocore.exceptions", reason="s3fs (the test extra) brings botocore")

    def wrapped():
        try:
            raise botocore_errors.NoCredentialsError()
        except Exception as error:
            raise RuntimeError("listing failed") from error

    assert isinstance(translate(_raised(wrapped)), StoreError)
    assert translate(KeyError("model")) is None and translate(ZeroDivisionError()) is None
    assert translate(KeyboardInterrupt()) is None


def test_network_errors_name_the_endpoint_and_the_offline_switch(monkeypatch):
    import httpx2

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    known = translate(httpx2.ConnectError("[Errno 111] Connection refused"))
    assert isinstance(known, HubError)
    assert str(known) == (
        "cannot connect to http://127.0.0.1:9 ([Errno 111] Connection refused); no network? set "
        "HF_HUB_OFFLINE=1 to use the local cache only (see README, Working offline)"
    )


def test_probe_goes_offline_only_when_the_endpoint_does_not_answer(monkeypatch, caplog):
    """Online when the endpoint answers HTTP; offline when the port is closed, and (issue 32) when
    it accepts connections and never answers: the Hub client then retried every file it looked for
    5 times at 10 s each (select-candidates took 7 minutes to fail)."""
    import http.server
    import threading

    import huggingface_hub.constants

    import conceptforge.external_errors as external

    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (the http.server API)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert probe_hub() and not go_offline_if_unreachable()
        assert "HF_HUB_OFFLINE" not in os.environ
    finally:
        server.shutdown()
        server.server_close()
    mute = MuteServer()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{mute.port}")
        with caplog.at_level(logging.WARNING, logger="conceptforge"):
            assert not probe_hub(answer_timeout=1.0) and go_offline_if_unreachable()
        assert "accepts connections but does not answer: working offline" in caplog.text
    finally:
        mute.close()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    assert go_offline_if_unreachable() and os.environ["HF_HUB_OFFLINE"] == "1"
    assert huggingface_hub.constants.HF_HUB_OFFLINE and external._PROBED
    assert not go_offline_if_unreachable()  # set now: the user's (or our) choice is kept


def test_each_warning_is_printed_once(capsys):
    from conceptforge.cli import OnceFilter

    logger = logging.getLogger("test.once")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(OnceFilter())
    logger.addHandler(handler)
    try:
        for _ in range(3):
            logger.warning("Couldn't connect to the Hub: %s", "retrying")
            logger.error("an error is never hidden")
        logger.warning("another warning")
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err.splitlines() == [
        "Couldn't connect to the Hub: retrying",
        "an error is never hidden",
        "an error is never hidden",
        "an error is never hidden",
        "another warning",
    ]


def _cli(*args, env, timeout=120):
    # The suite's S3 fixture exports its credentials to os.environ: a case without credentials drops them.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("FSSPEC_S3_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**inherited, "PYTHONPATH": str(REPO), **env},
        cwd=REPO,
    )


def test_s3_without_credentials_or_with_a_dead_endpoint_is_one_line(tmp_path):
    pytest.importorskip("s3fs")
    from tests.engine.s3_server import S3Server

    # A live server: status only reads, and a read of a dead endpoint fails on the connection first.
    server = S3Server()
    no_credentials = {
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "FSSPEC_S3_ENDPOINT_URL": server.endpoint,
    }
    dead = {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
        "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
    }
    try:
        for env, command, start in [
            (no_credentials, "status", "error: no credentials for the object store"),
            (dead, "assemble", "error: cannot reach the object store"),
        ]:
            result = _cli(command, "s3://bucket/run", env=env)
            assert result.returncode == 2, result.stderr[-2000:]
            assert "Traceback" not in result.stderr
            assert result.stderr.strip().splitlines() == [result.stderr.strip()] and result.stderr.startswith(start), (
                result.stderr
            )
    finally:
        server.stop()


def test_evaluate_offline_without_hf_hub_offline_is_quick_and_says_why(tmp_path):
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    result = _cli("evaluate", "--model", "org/some-model", "--tasks", "binding-clip", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == len(set(lines)) == 2  # the warning once, the error once: no retries in between
    assert "cannot be reached: working offline" in lines[0] and lines[1].startswith("error: ")
    assert "GPU" not in lines[1] and "offline" in lines[1]


def test_a_builtin_connection_error_offline_says_what_to_do(monkeypatch):
    """``datasets`` raises the builtin ConnectionError for a mistyped local folder while offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    known = translate(ConnectionError("Couldn't reach './typo' on the Hub (OfflineModeIsEnabled)"))
    assert isinstance(known, HubError) and str(known) == (
        "Couldn't reach './typo' on the Hub (OfflineModeIsEnabled); offline mode (HF_HUB_OFFLINE=1): download it "
        "where there is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )


def test_offline_advice_matches_who_switched_offline(monkeypatch):
    """Issue 32: "unset HF_HUB_OFFLINE" was advised to users who never set it (the probe had)."""
    import huggingface_hub.errors

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    assert go_offline_if_unreachable()
    message = str(translate(huggingface_hub.errors.LocalEntryNotFoundError("no cached config.json")))
    assert "cannot be reached, so this run works offline" in message and "unset HF_HUB_OFFLINE" not in message


class MuteServer:
    """A TCP server that accepts every connection and never answers (a stuck proxy or mirror)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        import threading

        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def mute_hub():
    server = MuteServer()
    yield f"http://127.0.0.1:{server.port}"
    server.close()


def test_a_hub_that_accepts_and_never_answers_fails_in_one_line(mute_hub, tmp_path):
    """Issue 32: publish, verify, diff and evaluate --dataset used to hang for ever, silently, and
    select-candidates took 7 minutes of retries to fail.

    publish, verify and diff do not probe: the per-request bound stops them (``HF_HUB_DOWNLOAD_TIMEOUT``,
    3 s here to keep the test short). The commands that load models probe first, find an endpoint
    that accepts and never answers, and work offline (one warning, then the error). The
    subprocess limit is generous (the machine may be loaded): what is checked is the outcome.

    The six commands run side by side: each mostly waits on the silent server, and one after the
    other they took half a minute of the default suite (the server holds every connection apart).
    """
    from concurrent.futures import ThreadPoolExecutor

    from tests.publish.publish_helpers import make_dataset

    # its own copy for each command that reads a local release (they run at the same time)
    diffed = make_dataset(tmp_path / "diffed", n_train=4, n_test=2)
    published = make_dataset(tmp_path / "published", n_train=4, n_test=2)
    env = {"HF_ENDPOINT": mute_hub, "HF_HUB_DOWNLOAD_TIMEOUT": "3", "HF_TOKEN": "hf_test"}
    commands = [
        ("verify", "org/name@v1.0.0"),
        ("diff", str(diffed), "org/name@v1.0.0"),
        ("publish", str(published), "--repo-id", "org/name", "--version", "v1.0.0"),
        ("diff", "org/name@v1.0.0", "org/name@v1.1.0"),
        ("evaluate", "binding", "--dataset", "org/name", "--models", "clip", "--clip-model", "org/clip"),
        ("evaluate", "--model", "org/model", "--tasks", "binding-clip"),
    ]
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        results = list(pool.map(lambda args: _cli(*args, env=env, timeout=600), commands))
    for args, result in zip(commands, results):
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr[-2000:])
        if args[0] == "evaluate":  # a command that loads models probes: offline from the start
            assert "accepts connections but does not answer: working offline" in lines[0], (args, lines)
            lines = lines[1:]
            assert "cannot be reached, so this run works offline" in lines[-1] or "offline" in lines[-1], (args, lines)
        else:
            assert "did not answer within 3 s" in lines[-1] or "timed out" in lines[-1], (args, lines)
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr[-2000:])


def test_ray_connection_failures_are_reported_as_rays(monkeypatch):
    """A bare ConnectionError from Ray's code (and Ray's own cluster errors) used to read as a Hub error."""
    from conceptforge.errors import ClusterError

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")

    def from_ray():
        exec(
            compile(
                "raise ConnectionError('Failed to connect to Ray cluster at 10.0.0.1:6379')", "ray/worker.py", "exec"
            ),
            {"__name__": "ray._private.worker"},
        )

    known = translate(_raised(from_ray))
    assert isinstance(known, ClusterError) and str(known).startswith(
        "Ray: Failed to connect to Ray cluster at 10.0.0.1:6379: check --ray-address"
    )
    assert "HF_HUB_OFFLINE" not in str(known)
    # the same builtin error raised elsewhere (datasets, the Hub client) is still a network error
    assert isinstance(translate(ConnectionError("Couldn't reach the Hub")), HubError)
    AuthenticationError = type("AuthenticationError", (Exception,), {"__module__": "ray.exceptions"})
    assert isinstance(translate(AuthenticationError("token rejected")), ClusterError)


def test_an_object_store_that_accepts_and_never_answers_fails_in_one_line(tmp_path):
    """botocore's 60 s reads x 5 attempts inside s3fs's 5 retries hung `status s3://…` for many minutes,
    then said "not a conceptforge run". The user's own read_timeout (1 s here) is kept; the rest is ours."""
    pytest.importorskip("s3fs")
    server = MuteServer()
    try:
        env = {
            "FSSPEC_S3": '{"config_kwargs": {"read_timeout": 1}}',
            "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{server.port}",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        from concurrent.futures import ThreadPoolExecutor

        commands = ("status", "assemble")
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:  # both wait on the silent server: side by side
            results = list(pool.map(lambda command: _cli(command, "s3://bucket/run", env=env, timeout=600), commands))
        for result in results:
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
            assert len(lines) == 1 and "Read timeout on endpoint URL" in lines[0], lines
    finally:
        server.close()


def test_commands_that_need_no_network_do_not_probe_the_hub(tmp_path):
    """Issue 32: `evaluate --tasks list` spent 2 s probing an unreachable Hub and warned about it."""
    result = _cli("evaluate", "--tasks", "list", env={"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"})
    assert result.returncode == 0 and "| sub-vlm " in result.stdout
    assert "cannot be reached" not in result.stderr and "HF_HUB_OFFLINE" not in result.stderr
