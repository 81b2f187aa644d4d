# The commands README.md documents. Every target builds its own virtual
# environment from pyproject.toml first and reuses it while that file is unchanged.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?=
NOTEBOOKS := $(wildcard notebooks/*.ipynb)

.PHONY: demo test lab student clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e ".[lab,test,torchcodec]"
	touch $(STAMP)

# Make the kit's photo-like set if it is missing (or measure DATA=path/to/ImageFolder, which must exist), then
# run the main job on it.
demo: $(STAMP)
	LABKIT_QUICK=$${LABKIT_QUICK-1} $(BIN)/labkit demo $(if $(DATA),--data $(DATA))

# The lint and the format (ruff, configured in pyproject.toml), unit tests (tests/browser drives the panels in
# JupyterLab with a Chromium, skipped when none is found),
# then every notebook under nbval in quick mode; the sanitize file keeps paths, addresses and timings out of
# the comparison of the cells tagged nbval-check-output. -rfEs: the last lines name every failure, error
# (a fixture's check after its test, such as no_leaks) and skip with its reason.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	LABKIT_QUICK=1 $(BIN)/python -m pytest -rfEs tests $(if $(NOTEBOOKS),--nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg $(NOTEBOOKS))

# The course: JupyterLab on notebooks/ (quick mode unless LABKIT_QUICK=0), on a free port with a fresh
# token, so the address to open is known before it starts and printed first: the English edition's first
# notebook, and the Chinese edition's (notebooks/zh/, built by labkit course --translate zh).
LAB_FIRST := 00_start_here.ipynb
lab: $(STAMP)
	@port=$$($(BIN)/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'); \
	token=$$($(BIN)/python -c 'import secrets; print(secrets.token_hex(16))'); \
	echo ""; \
	echo "  The course is at  http://localhost:$$port/lab/tree/$(LAB_FIRST)?token=$$token"; \
	echo "  课程中文版：       http://localhost:$$port/lab/tree/zh/$(LAB_FIRST)?token=$$token"; \
	echo "  Open it in your browser and start with $(LAB_FIRST); the notebooks go in number order."; \
	echo "  Ctrl-C twice stops JupyterLab."; \
	echo ""; \
	LABKIT_QUICK=$${LABKIT_QUICK-1} exec $(BIN)/jupyter lab notebooks/ --ServerApp.port=$$port --ServerApp.port_retries=0 \
		--IdentityProvider.token=$$token --ServerApp.default_url=/lab/tree/$(LAB_FIRST)

# The student edition of the course: every build a stub to write, every check graded (labkit course --student).
# Written to student/ (ignored by git), the Chinese one to student/zh/; made again, it replaces only an earlier
# edition there.
student: $(STAMP)
	$(BIN)/labkit course --student student

clean-venv:
	rm -rf $(VENV)
