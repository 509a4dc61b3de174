"""Sub-commands of ``conceptforge``: one module each, with ``add_arguments(parser)`` and ``run(args) -> int``."""
