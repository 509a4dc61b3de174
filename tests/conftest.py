"""Session-wide test settings. Area-specific fixtures live in tests/<area>/conftest.py."""

import os
import tempfile

# Nothing in the tests may reach the real Hub; tiny models are saved and loaded locally.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "HF_HOME" not in os.environ:
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="conceptforge-hf-home-")
