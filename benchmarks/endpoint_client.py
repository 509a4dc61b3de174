"""Endpoint client: 8 concurrent requests vs a sequential ``openai`` loop, and a warm-cache rerun vs a cold run.

Baseline: what a user writes without conceptforge, a plain loop of
``openai.OpenAI(...).chat.completions.create(...)`` one request after the other. Ours:
``EndpointClient.complete`` with ``max_concurrency=8`` and a fresh response cache each round
(so every request is sent and committed). Both talk to the same local server process
(``conceptforge.testing.fault_server``, 127.0.0.1, threaded) that waits a fixed 20 ms before each
answer, standing in for a model server's per-request latency. The cache comparison reruns the
same requests with a new client on a filled cache (what a resumed or repeated run does: one
``GET /v1/models``, no chat request) against a cold run. The time is mostly waiting on the
server, which runs in another process: CPU time is not compared.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._harness import Result, compare

LATENCY_MS = 20
CONCURRENCY = 8
MODEL = "tiny-vlm"


def _requests(n: int):
    from conceptforge.loaders.harness.endpoint_client import ChatRequest

    return [ChatRequest(messages=({"role": "user", "content": f"Is there a bird in picture {i}?"},)) for i in range(n)]


def run(quick: bool) -> list[Result]:
    import openai

    from conceptforge.loaders.harness.endpoint_client import EndpointClient, EndpointSettings

    n, repeats = (64, 5) if quick else (256, 7)
    server = subprocess.Popen(
        [sys.executable, "-m", "conceptforge.testing.fault_server", "--model", MODEL, "--latency-ms", str(LATENCY_MS)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1"},
    )
    try:
        url = server.stdout.readline().strip()  # printed once the server listens
        requests = _requests(n)
        settings = EndpointSettings(base_url=url, model=MODEL, max_concurrency=CONCURRENCY)
        plain = openai.OpenAI(base_url=url, api_key="EMPTY")
        answers: dict[str, list[str]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)

            def ours(round_: int, cache: Path | None = None) -> None:
                with EndpointClient(
                    settings, cache_dir=cache or root / f"cold-{round_}-{os.urandom(4).hex()}"
                ) as client:
                    responses = client.complete(requests)
                answers["ours"] = [r["choices"][0]["message"]["content"] for r in responses]

            def sequential(_round: int) -> None:
                texts = []
                for request in requests:
                    completion = plain.chat.completions.create(
                        model=MODEL, messages=list(request.messages), max_tokens=1, temperature=0.0, seed=0
                    )
                    texts.append(completion.choices[0].message.content)
                answers["baseline"] = texts

            def warm(_round: int) -> None:
                ours(_round, cache=root / "warm")

            ours(-1)  # warm-up: imports, connections
            sequential(-1)
            warm(-1)  # fills the warm cache
            work = f"{n} chat requests, server latency {LATENCY_MS} ms, 127.0.0.1"
            concurrent = compare(
                "endpoint client, concurrency",
                (f"ours: {CONCURRENCY} concurrent, cached", ours),
                ("sequential openai loop", sequential),
                repeats,
                work,
                cpu=False,
            )
            assert answers["ours"] == answers["baseline"], "the two sides got different answers"
            concurrent.extra = {
                "requests/s, ours (median)": f"{n / sorted(concurrent.ours)[len(concurrent.ours) // 2]:.0f}",
                "requests/s, sequential (median)": f"{n / sorted(concurrent.baseline)[len(concurrent.baseline) // 2]:.0f}",
                f"ideal ratio at {CONCURRENCY} concurrent": f"{1 / CONCURRENCY:.3g}x",
            }
            cache = compare(
                "endpoint client, response cache",
                ("ours: rerun on a warm cache", warm),
                ("ours: cold cache", ours),
                repeats,
                work,
                cpu=False,
            )
        plain.close()
        return [concurrent, cache]
    finally:
        server.terminate()
        server.wait(timeout=30)
