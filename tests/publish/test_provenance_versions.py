"""Provenance collection (package versions, model revisions, command line) and version tags."""

from __future__ import annotations

import pytest

from conceptforge.cards import collect_provenance, package_versions, redact_secrets, resolve_model_revision
from conceptforge.cards.provenance import command_line
from conceptforge.cards.versions import Version, parse_version, previous_version, published_versions
from conceptforge.errors import ConceptforgeError

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_redaction_of_tokens_and_secret_flags():
    text = "run --token hf_abcdefghijk123 --hf-token=xyz --api_key secret HF_TOKEN=abc plain hf_zzzzzzzzzzzz"
    redacted = redact_secrets(text)
    assert redacted == "run --token *** --hf-token=*** --api_key *** HF_TOKEN=*** plain hf_***"
    assert redact_secrets("value mysecretvalue here", ["mysecretvalue"]) == "value *** here"


def test_command_line_redacts_the_active_token(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "plain-secret-123")
    line = command_line(["scripts/gen.py", "--note", "plain-secret-123", "--out", "a b"])
    assert line == "python scripts/gen.py --note *** --out 'a b'"


def test_package_versions():
    versions = package_versions(["datasets", "huggingface_hub", "surely-not-installed-pkg"])
    assert set(versions) == {"datasets", "huggingface_hub"}
    import datasets

    assert versions["datasets"] == datasets.__version__


def test_model_revision_resolution(tmp_path):
    assert resolve_model_revision("org/model", SHA) == SHA
    cache = tmp_path / "hub"
    (cache / "models--org--model" / "refs").mkdir(parents=True)
    (cache / "models--org--model" / "refs" / "main").write_text(SHA)
    assert resolve_model_revision("org/model", cache_dir=cache, allow_network=False) == SHA
    assert resolve_model_revision("org/other", "v2", cache_dir=cache, allow_network=False) == "v2 (unresolved)"
    snapshot = cache / "models--org--model" / "snapshots" / SHA
    snapshot.mkdir(parents=True)
    assert resolve_model_revision(str(snapshot)) == SHA
    local = tmp_path / "tiny"
    local.mkdir()
    (local / "config.json").write_text('{"layers": 1}')
    first = resolve_model_revision(str(local))
    assert first.startswith("local-sha256:") and resolve_model_revision(str(local)) == first
    (local / "config.json").write_text('{"layers": 2}')
    assert resolve_model_revision(str(local)) != first


def test_collect_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hub"
    (cache / "models--org--vqa" / "refs").mkdir(parents=True)
    (cache / "models--org--vqa" / "refs" / "main").write_text(SHA)
    provenance = collect_provenance(
        generator="conceptforge.filters.vqa.scorer",
        models={"vqa": "org/vqa", "pinned": ("org/flux", "f" * 40)},
        parameters={"top_fraction": 0.1, "auth": "--token hf_secretsecret123"},
        seeds=7,
        argv=["scripts/filter_sub.py", "--token", "hf_secretsecret123"],
        packages=["datasets"],
        cache_dir=cache,
    )
    assert provenance["models"] == [
        {"role": "vqa", "id": "org/vqa", "revision": SHA},
        {"role": "pinned", "id": "org/flux", "revision": "f" * 40},
    ]
    assert provenance["seeds"] == 7 and set(provenance["packages"]) == {"datasets"}
    assert "hf_secretsecret123" not in str(provenance)
    assert provenance["command_line"] == "python scripts/filter_sub.py --token ***"


def test_versions():
    assert parse_version("v1.2.3") == Version(1, 2, 3) and str(Version(1, 2, 3)) == "v1.2.3"
    assert parse_version("v1.10.0") > parse_version("v1.9.9")
    for bad in ("1.2.3", "v1.2", "v01.2.3", "v1.2.3-rc1", "latest"):
        with pytest.raises(ConceptforgeError, match="vMAJOR.MINOR.PATCH"):
            parse_version(bad)
    versions = published_versions(["v1.0.0", "paper-camera-ready", "v1.10.0", "v1.2.0"])
    assert versions == [Version(1, 0, 0), Version(1, 2, 0), Version(1, 10, 0)]
    assert previous_version(Version(1, 5, 0), versions) == Version(1, 2, 0)
    assert previous_version(Version(0, 1, 0), versions) is None


def test_local_paths_with_spaces_are_elided_whole():
    """Issue 32: a provenance path with a space was split like a command line: '.../my data/CUB_200_2011'."""
    from conceptforge.cards.provenance import strip_local_paths

    assert strip_local_paths({"cub_dir": "/home/me/my data/CUB_200_2011"}) == {"cub_dir": ".../CUB_200_2011"}
    assert strip_local_paths(command_line(["conceptforge", "filter", "sub", "--candidates", "/scratch/a b/cands"])) == (
        "conceptforge filter sub --candidates .../cands"
    )
