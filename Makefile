# One-word entry points. Everything runs in a local virtual environment (.venv).
#   make reproduce   -- the main job: the `quick` profile trained from scratch end to end (data,
#                       search, final runs, tables, figures) into build/reproduce/, compared with
#                       the committed tables; PROFILE=paper for the full paper (GPUs/cluster)
#   make report      -- the committed tables and figures redrawn from the committed run records
#   make test        -- the default test suite on every core (about 18 minutes on 2 quiet CPU
#                       cores, the install included)
#   make test-slow   -- the slow tests only
#   make test-gpu    -- the CUDA tests only (needs a GPU and a CUDA build, see TORCH)
#   make lint        -- ruff and lint-imports (the import direction, pyproject.toml)
#   make lab         -- JupyterLab on notebooks/ (127.0.0.1; open the printed URL), with the
#                       kernel "Python (fruit)"; LAB_PORT=8888, KERNEL_INSTALL=--user to see
#                       the kernel from another Jupyter too
#   make test-browser -- the explore notebook in JupyterLab in headless Chromium (installs
#                       Debian's chromium chromium-driver as root, else fails saying so);
#                       screenshot in build/browser/
# TORCH picks the PyTorch build (default: torch==2.13.0). For another build, e.g. CUDA:
#   make clean-venv && make TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu130" test

PYTHON  ?= python3
VENV    ?= .venv
TORCH   ?= torch==2.13.0
PROFILE ?= quick
REPRO   ?= build/reproduce
BIN      = $(VENV)/bin
LAB_PORT ?= 8888
KERNEL_INSTALL ?= --sys-prefix

# a recipe that fails leaves no target behind that would count as done (bin/fruit is the
# venv's stamp: pip writes it before the kernels are registered)
.DELETE_ON_ERROR:

.PHONY: venv reproduce report test test-slow test-gpu test-all lint format bench clean-venv lab test-browser

$(BIN)/fruit: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(BIN)/python -m ipykernel install --sys-prefix --name fruit --display-name "Python (fruit)" >/dev/null
	touch $@

venv: $(BIN)/fruit

# Train the profile from scratch into $(REPRO) (the committed records under results/runs
# would otherwise count as done), then compare its tables with the committed ones.
# Run it again to resume; `make report` redraws the committed tables from the records.
reproduce: venv
	@$(BIN)/fruit run --profile $(PROFILE) --results $(REPRO)/results --figures $(REPRO)/figures; \
	status=$$?; \
	if [ $$status -eq 75 ]; then echo "paused: run \`make reproduce\` again to go on"; exit 75; fi; \
	if [ $$status -ne 0 ]; then exit $$status; fi
	@scripts/reproduce-verdict.sh $(PROFILE) $(REPRO) $(BIN)/python

report: venv
	$(BIN)/fruit report --profile $(PROFILE)

# The default suite on every core (pytest-xdist; TEST_JOBS=1 for one process): the tests
# are independent, each in its own temporary folders
TEST_JOBS ?= auto
test: venv
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal --durations=15

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

test-gpu: venv
	$(BIN)/python -m pytest -q -m gpu

test-all: venv
	$(BIN)/python -m pytest -q -m "slow or not slow"

lint: venv
	$(BIN)/ruff check lib tests benchmarks notebooks
	$(BIN)/ruff format --check lib tests benchmarks notebooks
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format lib tests benchmarks notebooks
	$(BIN)/ruff check --fix lib tests benchmarks notebooks

bench: venv
	$(BIN)/python benchmarks/stacks.py
	$(BIN)/python benchmarks/models.py

# JupyterLab and ipywidgets in the same environment, and a named kernel for it
# order-only on the venv: pip rewrites bin/fruit on every install, which must not make the
# stamps of the extras stale (they would reinstall each other for ever)
$(VENV)/.lab: pyproject.toml | $(BIN)/fruit
	$(BIN)/python -m pip install --quiet -e ".[dev,lab]"
	touch $@

# as root (e.g. in a container) JupyterLab wants --allow-root; the kernel is registered at
# every call, so KERNEL_INSTALL=--user takes effect after an earlier `make lab` too
lab: $(VENV)/.lab
	$(BIN)/python -m ipykernel install $(KERNEL_INSTALL) --name fruit --display-name "Python (fruit)" >/dev/null
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) \
		--ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

$(VENV)/.browser: pyproject.toml | $(VENV)/.lab
	$(BIN)/python -m pip install --quiet -e ".[dev,lab,browser]"
	touch $@

# Installs Debian's chromium and its driver where it can (as root with apt-get); otherwise,
# without them, the test fails (it is skipped only in the default suite) and says how.
test-browser: $(VENV)/.browser
	@if ! command -v chromedriver >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and chromium-driver (apt-get)"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -qq >/dev/null && \
	  apt-get install -y -qq chromium chromium-driver >/dev/null || true; \
	fi
	FRUIT_BROWSER_REQUIRED=1 FRUIT_BROWSER_ARTIFACTS=build/browser $(BIN)/python -m pytest -q -m slow -s tests/test_browser.py

clean-venv:
	rm -rf $(VENV)
