"""Model adapters: what each model family can do for a task, chosen from the model's own files.

A task declares the capability it needs (``base.EMBED``, ``MATCH``, ``CHOOSE``, ``CONCEPTS``,
``GENERATE``), never a model family; each family's adapter (one module each) provides some of
them. ``base`` holds the capabilities, the families and their detection; the family modules are
imported only when a model of that family is loaded.
"""
