"""CompMap from a Hub dataset at a pinned revision (the local Hub test server, the real clients):
the starter spec of ``ORG/NAME@REV`` loads, and ``evaluate compmap --spec --dry-run`` plans from it.

One fresh process does the Hub side (the client reads ``HF_ENDPOINT`` when it is imported):
it pushes the shapes x textures pairs with ``datasets``, tags ``v1``, writes the starter spec and
runs the command's dry run; the test checks what it printed.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.testing.hub_server import HubServer

REPO_ROOT = Path(__file__).resolve().parents[2]

CLIENT = """
import os, sys
from pathlib import Path
import datasets
from huggingface_hub import HfApi
from tests.specs.compmap_data import write_shape_pairs
from conceptforge.commands import main
from conceptforge.loaders.compmap.benchmark import load_compmap_spec
from conceptforge.loaders.compmap.starter import starter_spec

work = Path(sys.argv[1])
write_shape_pairs(work / "shapes")
datasets.load_from_disk(str(work / "shapes")).push_to_hub("lab/shapes")
HfApi().create_tag("lab/shapes", tag="v1", repo_type="dataset")
(work / "hub.yaml").write_text(starter_spec("lab/shapes@v1", name="shapes-hub"))
assert load_compmap_spec(work / "hub.yaml").spec.czsl.source.revision == "v1"
os.chdir(work)
sys.exit(main(["evaluate", "compmap", "--spec", "hub.yaml", "--dry-run"]))
"""


@pytest.fixture
def hub(tmp_path):
    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path / "hub-storage", token=token).start()
    yield server, token
    server.stop()


def test_hub_source_at_a_pinned_revision(hub, tmp_path):
    server, token = hub
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        HF_ENDPOINT=server.url,
        HF_TOKEN=token,
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(tmp_path / "client-hf-home"),
        PYTHONPATH=str(REPO_ROOT),
        TQDM_DISABLE="1",
    )
    (tmp_path / "work").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, str(tmp_path / "work")], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    spec = (tmp_path / "work" / "hub.yaml").read_text()
    assert "hub: lab/shapes" in spec and 'revision: "v1"' in spec
    assert "# attributes (3) in column 'texture': dotted, plain, striped" in spec
    assert "CompMap shapes-hub: czsl (generalized compositional zero-shot learning) on lab/shapes@v1" in proc.stdout
    assert "pairs train/val/test 4/2/3 (seen 4, unseen 3)" in proc.stdout
