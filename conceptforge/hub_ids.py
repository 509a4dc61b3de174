"""Names the Hugging Face Hub knows, checked where a flag is parsed: license ids and repo ids.

Why in the core: ``--license`` and ``--results-repo`` used to be checked when the card was
validated or the results pushed, after hours of generation or evaluation; the flag types
(:mod:`conceptforge.argtypes`) check them first and the card validator uses the same list.
"""

from __future__ import annotations

import re

# https://huggingface.co/docs/hub/repositories-licenses
HUB_LICENSES = frozenset(
    """
apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear
c-uda cc cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0
cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0
cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl
ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1
lgpl-3.0 isc h-research intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl
openmdw-1.0 openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr
deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3
llama4 grok2-community gemma unknown other
""".split()
)

#: ``ORG/NAME`` as the Hub accepts it (huggingface_hub's validate_repo_id, plus the owner part).
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def repo_id_problem(text: str) -> str | None:
    """Why ``text`` is not a Hub repo id ``ORG/NAME``, or None."""
    if not REPO_ID.fullmatch(text) or "--" in text or ".." in text or text.endswith((".git", ".")):
        return f"{text!r} is not a Hub repo id of the form ORG/NAME (letters, digits, '-', '_', '.')"
    return None
