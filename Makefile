# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Both bootstrap .venv: torch==2.14.1 with its torchvision==0.29.1 (open_clip needs torchvision;
# the CPU torch 2.13.0 on disk breaks every torchvision wheel: docs/install.md, "torch, torchvision and open_clip") is installed
# only when the venv has no torch, so a torch you put there first (or inherit with
# VENV_FLAGS=--system-site-packages) is kept.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
VENV_FLAGS ?=
PY := $(VENV)/bin/python
DEMO_OUT ?= outputs/binding-demo
PYTEST_ARGS ?=
# Both cores: tests/conftest.py keeps each module (and all of tests/cluster) on one worker.
PYTEST_WORKERS ?= 2

.PHONY: install system-deps demo test docs clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e ".[blender,test]"
	touch $@

install: $(VENV)/.installed

# Debian's Chromium for the annotation app's browser tests (Playwright drives it; its own
# browser download cannot work offline). Installed only where missing and we may use apt.
# Debian's Slurm 22.05, munge and Open MPI for the cluster tests (tests/cluster: a private
# single-node Slurm, mpirun): the same rule; without them those tests skip with one reason.
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	{ command -v sbatch && test -x /usr/sbin/slurmctld && test -x /usr/sbin/slurmd; } >/dev/null 2>&1 || missing="$$missing slurm-wlm"; \
	test -x /usr/sbin/munged || missing="$$missing munge"; \
	command -v mpirun >/dev/null 2>&1 || missing="$$missing openmpi-bin"; \
	[ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  elif sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "warning:$$missing missing and apt unavailable; browser, Slurm and MPI tests will be skipped"; fi; }

demo: $(VENV)/.installed
	$(VENV)/bin/conceptforge generate binding --dataset all --preset demo --out $(DEMO_OUT)

# The 25 slowest tests and the total time go to the log: a suite that grows slower shows it
# (CI's limit is 90 minutes; the default suite is kept under 15 on a quiet 2-core machine).
# compileall first: where PYTHONDONTWRITEBYTECODE is set (CI's image sets it) every one of the
# suite's `conceptforge` subprocesses compiled our modules again (~0.5 s each, measured).
test: $(VENV)/.installed system-deps
	@start=$$(date +%s); echo "make test: started $$(date -u '+%Y-%m-%d %H:%M:%S') UTC, load $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; \
	$(PY) -m compileall -q -j 0 conceptforge generators loaders filters cards scripts tests >/dev/null; \
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS); \
	status=$$?; took=$$(( $$(date +%s) - start )); \
	echo "make test: ruff and pytest took $$((took / 60)) min $$((took % 60)) s (exit $$status, load $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"; \
	exit $$status

# The documentation site (mkdocs.yml) into site/: strict, so a broken link, a missing API object or
# a documented `conceptforge` command the parsers do not know fails it. `mkdocs serve` previews it.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) outputs .pytest_cache site build/api-src
