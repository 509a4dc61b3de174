"""A real S3-compatible server (moto's server mode) on 127.0.0.1 for the store tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class S3Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        command = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
        if command is None:
            raise RuntimeError("moto_server is not installed: pip install 'moto[server]' s3fs (the test extra)")
        self.process = subprocess.Popen(
            [command, "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("moto_server did not start")

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the server through fsspec (no code changes)."""
        return {
            "FSSPEC_S3_ENDPOINT_URL": self.endpoint,
            "FSSPEC_S3_KEY": "testing",
            "FSSPEC_S3_SECRET": "testing",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(
            key="testing", secret="testing", client_kwargs={"endpoint_url": self.endpoint}, use_listings_cache=False
        )

    def make_bucket(self, name: str) -> None:
        self.filesystem().mkdir(name)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
