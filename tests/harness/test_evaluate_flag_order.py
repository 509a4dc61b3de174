"""``evaluate`` refuses in the order a user can act on (issue 45.8): the documented flag conflict
before the missing GPU, an ``--offload-folder`` that cannot be made before any data loads, and
``--push-results`` of a served model without ``--results-repo`` before the endpoint is asked.
"""

from __future__ import annotations

import socket
import threading

import pytest

from conceptforge.commands import main


def _evaluate(tmp_path, model, data, *extra) -> list[str]:
    return ["evaluate", "--model", str(model), "--tasks", f"binding-clip:{data}", *extra]


def test_device_map_with_device_cuda_is_refused_for_the_conflict_not_the_gpu(
    tmp_path, capsys, tiny_clip_dir, single_object_dir
):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the order of the two refusals shows only without one")
    argv = _evaluate(tmp_path, tiny_clip_dir, single_object_dir, "--output", str(tmp_path / "r.json"))
    assert main([*argv, "--device-map", "auto", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: --device cuda and --device-map auto: the map places the model; drop --device"
    # --device cuda alone is still refused for the GPU this machine lacks, in one line, nothing written
    assert main([*argv, "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "error: --device cuda: no CUDA GPU is visible on this machine (check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES, or pass --device cpu)"
    )
    assert not (tmp_path / "r.json").exists()


def test_an_offload_folder_that_cannot_be_made_is_refused_by_the_parser(
    tmp_path, capsys, tiny_clip_dir, single_object_dir
):
    """``/proc`` refuses every new folder, even to root (whom permission bits never stop): the
    folder is tried for real and the parser names it; nothing is loaded or left."""
    argv = _evaluate(tmp_path, tiny_clip_dir, single_object_dir, "--output", str(tmp_path / "r.json"))
    assert main([*argv, "--device-map", "auto", "--offload-folder", "/proc/conceptforge-offload/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "error: conceptforge evaluate: argument --offload-folder: cannot make the folder "
        "/proc/conceptforge-offload/x (No such file or directory): give a folder on a disk you can write to "
        "(see conceptforge evaluate --help)"
    )
    assert not any("loaded" in line for line in err)  # refused before the data load
    # a folder that can be made is accepted and not left behind by the check
    from conceptforge.argtypes import creatable_dir

    assert creatable_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()


class _Listener:
    """A real TCP server that only counts the connections it is offered."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_push_results_of_a_served_model_without_results_repo_is_refused_before_the_endpoint_is_asked(
    tmp_path, capsys, single_object_dir
):
    server = _Listener()
    try:
        model = f"endpoint:tiny@http://127.0.0.1:{server.port}/v1"
        argv = _evaluate(tmp_path, model, single_object_dir, "--push-results", "--output", str(tmp_path / "r.json"))
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (
            f"error: --push-results: {model} is a served model, not a Hub repo; pass --results-repo ORG/NAME"
        )
        assert server.connections == 0  # the endpoint was never probed
    finally:
        server.close()
    assert not (tmp_path / "r.json").exists()
