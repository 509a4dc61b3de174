"""The server over plain HTTP: guards against bad input, disconnects and lost writes."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

from conceptforge.filters.annotation.db import AnnotationDB
from conceptforge.filters.annotation.server import StudyApp
from conceptforge.filters.annotation.session import StudySettings, open_study


def request(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), data


def post_answer(url: str, payload) -> tuple[int, dict]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, _, data = request(url, "POST", "/api/answer", body, {"Content-Type": "application/json"})
    return status, json.loads(data)


def test_page_assets_and_headers(sub_dataset, serve_study):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    status, headers, page = request(running.url, "GET", "/")
    assert status == 200 and b"/static/app.js" in page
    assert b"http://" not in page and b"https://" not in page  # no external assets
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    for path in ("/static/app.js", "/static/app.css"):
        status, _, asset = request(running.url, "GET", path)
        assert status == 200 and b"http" not in asset
    assert running.server.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize(
    "path",
    [
        "/api/image/../../../etc/passwd",
        "/../../etc/passwd",
        "/static/../server.py",
        "/static/app.py",
        "/api/image/99/image",
        "/api/image/-1/image",
        "/api/image/0/ref0",
        "/api/image/0/../image",
        "/api/image/0/%2e%2e%2fimage",
        "/api/image/0/image/extra",
        "/filters/annotation/server.py",
        "/api/image/0x0/image",
    ],
)
def test_only_the_datasets_own_images_are_served(sub_dataset, serve_study, path):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    status, _, body = request(running.url, "GET", "/api/image/0/image")
    assert status == 200 and body.startswith(b"\x89PNG")
    status, _, body = request(running.url, "GET", path)
    assert status == 404, path
    assert b"root:" not in body


def test_reference_images_are_served(conceptbed_dataset, serve_study):
    running = serve_study(conceptbed_dataset, "conceptbed-alignment", per_group=1)
    for slot in ("image", "ref0", "ref1", "ref2"):
        status, headers, body = request(running.url, "GET", f"/api/image/0/{slot}")
        assert status == 200 and headers["Content-Type"] == "image/png"
    assert request(running.url, "GET", "/api/image/0/ref3")[0] == 404


def test_malformed_submissions_are_rejected(sub_dataset, serve_study):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    sampled = running.app.sample[0]
    outside = next(i for i in running.app.dataset.rows if i not in running.app.position)
    good = {"annotator": "ann", "item_id": sampled, "answers": {"attribute": "yes", "bird": "no"}}
    cases = [
        (b"{not json", 400),
        (b"[1, 2]", 400),
        (b"[" * 60_000, 400),  # nesting deep enough to exhaust the JSON parser's recursion
        (b"\xff\xfe", 400),
        ({**good, "item_id": ["list"]}, 404),
        ({**good, "annotator": "../etc"}, 400),
        ({**good, "annotator": ""}, 400),
        ({**good, "item_id": outside}, 404),  # in the dataset, not in the study
        ({**good, "item_id": "no-such-item"}, 404),
        ({**good, "answers": {"attribute": "yes"}}, 400),
        ({**good, "answers": {"attribute": "yes", "bird": "perhaps"}}, 400),
        ({**good, "answers": "yes"}, 400),
        ({**good, "elapsed_ms": -5}, 400),
    ]
    for payload, expected in cases:
        status, body = post_answer(running.url, payload)
        assert status == expected, payload
        assert "error" in body
    assert request(running.url, "POST", "/api/answer", b"{}", {"Content-Type": "text/plain"})[0] == 415
    assert request(running.url, "POST", "/api/answer", b"x" * 70_000, {"Content-Type": "application/json"})[0] == 413
    assert request(running.url, "POST", "/api/nothing", b"{}", {"Content-Type": "application/json"})[0] == 404
    assert request(running.url, "DELETE", "/api/answer")[0] == 405
    assert request(running.url, "GET", "/api/next?annotator=a%20b")[0] == 400
    assert list(running.app.db.annotations()) == []
    # A good answer is stored once; the identical retry is a no-op, a different one a conflict.
    assert post_answer(running.url, good)[0] == 200
    assert post_answer(running.url, good)[0] == 200
    status, body = post_answer(running.url, {**good, "answers": {"attribute": "no", "bird": "no"}})
    assert status == 409
    assert [a.answers for a in running.app.db.annotations()] == [{"attribute": "yes", "bird": "no"}]


def test_browser_disconnecting_mid_answer(sub_dataset, serve_study):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    host, port = running.server.server_address[:2]
    body = json.dumps(
        {"annotator": "eve", "item_id": running.app.sample[0], "answers": {"attribute": "yes", "bird": "yes"}}
    ).encode()
    head = (
        f"POST /api/answer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    # 1. gone half-way through the body: nothing is stored
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head + body[: len(body) // 2])
    # 2. gone right after sending a complete answer, before reading the reply: it is stored
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_RDWR)
    # 3. gone after the headers only
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head)
    deadline = time.monotonic() + 5
    while not list(running.app.db.annotations()) and time.monotonic() < deadline:
        time.sleep(0.02)
    stored = list(running.app.db.annotations())
    assert [(a.annotator, a.item_id) for a in stored] == [("eve", running.app.sample[0])]
    status, _, data = request(running.url, "GET", "/api/next?annotator=eve")  # still serving
    assert status == 200 and json.loads(data)["progress"]["done"] == 1


def test_concurrent_annotators_lose_no_writes(sub_dataset, serve_study, tmp_path):
    """8 annotators through one server plus 2 through a second app on the same SQLite file."""
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=4, db=tmp_path / "shared.sqlite")
    second = StudyApp(
        study=running.app.study, dataset=running.app.dataset, db=AnnotationDB(tmp_path / "shared.sqlite"), seed=0
    )
    errors: list[str] = []

    def work(name: str, via_http: bool) -> None:
        try:
            while True:
                if via_http:
                    status, _, data = request(running.url, "GET", f"/api/next?annotator={name}")
                    payload = json.loads(data)
                else:
                    payload = second.next_payload(name)
                if payload["done"]:
                    return
                answer = {
                    "annotator": name,
                    "item_id": payload["item"]["item_id"],
                    "answers": {"attribute": "yes", "bird": "somewhat"},
                }
                if via_http:
                    status, body = post_answer(running.url, answer)
                    if status != 200:
                        errors.append(f"{name}: {status} {body}")
                else:
                    second.submit(answer)
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(f"{name}: {error!r}")

    threads = [threading.Thread(target=work, args=(f"http{i}", True)) for i in range(8)]
    threads += [threading.Thread(target=work, args=(f"direct{i}", False)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    total = len(running.app.sample)
    counts = running.app.db.annotators()
    assert len(counts) == 10 and set(counts.values()) == {total}


def test_resume_keeps_the_sample_and_refuses_other_settings(sub_dataset, tmp_path):
    from conceptforge.errors import ConceptforgeError

    settings = StudySettings(dataset_dir=sub_dataset, study="sub-attribute", db=tmp_path / "s.sqlite", per_group=2)
    app, config = open_study(settings)
    app.db.add("zed", app.sample[0], {"value": "none"})
    again, config_again = open_study(
        StudySettings(dataset_dir=sub_dataset, study="sub-attribute", db=tmp_path / "s.sqlite")
    )
    assert again.sample == app.sample and config_again == config  # per-group read back from the study
    assert again.next_payload("zed")["progress"]["done"] == 1
    with pytest.raises(ConceptforgeError, match="per_group: 2 -> 3"):
        open_study(StudySettings(dataset_dir=sub_dataset, study="sub-attribute", db=tmp_path / "s.sqlite", per_group=3))


def test_sampled_images_are_copied_once_and_match_the_dataset(conceptbed_dataset, tmp_path):
    import pyarrow.parquet as pq

    settings = StudySettings(
        dataset_dir=conceptbed_dataset, study="conceptbed-alignment", db=tmp_path / "c.sqlite", per_group=1
    )
    app, _ = open_study(settings)
    cache = tmp_path / "c.images"
    assert (cache / "complete.json").exists()
    assert len(list(cache.glob("*-image"))) == len(app.sample) and len(list(cache.glob("*-ref*"))) == 3 * len(
        app.sample
    )
    table = pq.read_table(next((conceptbed_dataset / "data").glob("concept-*.parquet"))).to_pylist()
    by_id = {row["item_id"]: row for row in table}
    for item_id in app.sample:
        assert app.dataset.image_bytes(item_id, "image")[0] == by_id[item_id]["image"]["bytes"]
        assert app.dataset.image_bytes(item_id, "ref2")[0] == by_id[item_id]["reference_images"][2]["bytes"]
    for slot in ("../c.sqlite", "ref", "image2", "ref0/../../x"):
        with pytest.raises(KeyError):
            app.dataset.image_bytes(app.sample[0], slot)
    # An interrupted copy (no marker) is redone on the next start.
    (cache / "complete.json").unlink()
    (cache / "0-image").unlink()
    open_study(settings)
    assert (cache / "0-image").exists() and (cache / "complete.json").exists()


def test_a_stalled_client_is_dropped_after_the_idle_timeout(sub_dataset, serve_study):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    running.server.RequestHandlerClass.idle_timeout = 1
    host, port = running.server.server_address[:2]
    body = json.dumps(
        {"annotator": "eve", "item_id": running.app.sample[0], "answers": {"attribute": "yes", "bird": "yes"}}
    ).encode()
    stalled = [
        b"",  # connected, then silent
        b"POST /api/answer HTTP/1.1\r\nHost: x\r\nContent-Ty",  # stops inside the headers
        (
            f"POST /api/answer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body[:10],
    ]  # stops inside the body
    for sent in stalled:
        with socket.create_connection((host, port)) as sock:
            sock.sendall(sent)
            sock.settimeout(10)
            start = time.monotonic()
            assert sock.recv(1024) == b""  # the server closed it without answering
            assert 0.5 < time.monotonic() - start < 8
    assert list(running.app.db.annotations()) == []
    assert post_answer(running.url, json.loads(body))[0] == 200  # still serving


def test_group_commit_keeps_every_acknowledged_answer(sub_dataset, tmp_path):
    """Many threads writing at once (batched into shared transactions), retries and conflicts included."""
    from conceptforge.filters.annotation.db import AlreadyAnswered

    app, _ = open_study(
        StudySettings(dataset_dir=sub_dataset, study="sub-faithfulness", per_group=4, db=tmp_path / "g.sqlite")
    )
    db, items = app.db, app.sample
    outcomes: dict[tuple[str, str], list] = {}
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(number: int) -> None:
        start.wait()
        for item in items:
            for annotator, answer in ((f"a{number}", "yes"), ("shared", "yes" if number % 2 else "no")):
                try:
                    result = db.add(annotator, item, {"attribute": answer, "bird": "no"})
                except AlreadyAnswered:
                    result = "conflict"
                with lock:
                    outcomes.setdefault((annotator, item), []).append((answer, result))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stored = {
        (a.annotator, a.item_id): a.answers["attribute"] for a in AnnotationDB(tmp_path / "g.sqlite").annotations()
    }
    for n in range(8):
        for item in items:
            assert outcomes[(f"a{n}", item)] == [("yes", True)] and stored[(f"a{n}", item)] == "yes"
    for item in items:  # "shared": exactly one writer won; identical retries are no-ops, the others conflict
        results = outcomes[("shared", item)]
        winner = stored[("shared", item)]
        assert [r for _, r in results].count(True) == 1
        assert all(r in (True, False) if answer == winner else r == "conflict" for answer, r in results)
    assert db.answered_by("a3") == set(items)


def test_answers_from_another_server_on_the_same_file_are_seen(sub_dataset, tmp_path):
    app, _ = open_study(
        StudySettings(dataset_dir=sub_dataset, study="sub-faithfulness", per_group=4, db=tmp_path / "s.sqlite")
    )
    other = AnnotationDB(tmp_path / "s.sqlite")
    first = app.next_payload("bob")["item"]["item_id"]
    app.submit({"annotator": "bob", "item_id": first, "answers": {"attribute": "yes", "bird": "no"}})
    assert app.db.answered_by("bob") == {first}  # cached now
    second = next(i for i in app.sample if i != first)
    other.add("bob", second, {"attribute": "no", "bird": "no"})  # another process's write
    assert app.db.answered_by("bob") == {first, second}
    assert app.next_payload("bob")["progress"]["done"] == 2
