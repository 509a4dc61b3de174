"""Offline test fixtures that ship with the package: tiny random models and a local Hub server.

Why installed (like ``diffusers.utils.testing_utils``): the test suite and the benchmarks both
need models with the real classes and ``from_pretrained`` layouts but only a few kilobytes of
random weights, small datasets in our schemas, and a Hub-compatible HTTP server to publish to —
and benchmarks must run from the installed package alone, with no test folder on ``sys.path``.
The library never imports this package; only tests, benchmarks and demos do.

Modules: :mod:`.tiny_models` (byte-level CLIP tokenizer, tiny CLIP), :mod:`.random_flux` (random
FLUX pipeline), :mod:`.tiny_conceptbed` (tiny SD-1.5, ViLT-VQA, image classifiers),
:mod:`.tiny_vlms` (tiny LLaVA / InternVL / Swin for the VQA filter), :mod:`.tiny_compmap` (tiny
BLIP and ViLT retrieval models), :mod:`.synthetic` (small datasets in our schemas and a fake CUB
directory), :mod:`.hub_server` (the local Hub-compatible server), :mod:`.slurm` (a private
single-node Slurm: munged, slurmctld, slurmd from Debian's ``slurm-wlm``), :mod:`.fault_server` (an
OpenAI-compatible chat server that answers canned text and injects 429s, 5xx, dropped connections,
hangs and malformed answers, for the endpoint client).
"""
