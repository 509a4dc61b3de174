"""Human validation studies for SUB and ConceptBed: a local annotation web app, scoring and filtering.

See docs/annotation.md. Modules: ``studies`` (what is asked), ``dataset`` (reading a dataset
directory), ``sampling`` (seeded samples), ``db`` (SQLite storage), ``server`` (the web app),
``stats`` (agreement, Pearson), ``results`` (the papers' scores and rules), ``apply`` (a filtered
dataset directory), ``session`` (glue for the command line).
"""

from conceptforge.filters.annotation.results import Rules, compute_results
from conceptforge.filters.annotation.studies import STUDIES, get_study

__all__ = ["STUDIES", "Rules", "compute_results", "get_study"]
