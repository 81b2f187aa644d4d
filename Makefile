# The commands README.md documents. Every target builds its own virtual
# environment from pyproject.toml first and reuses it while that file is unchanged.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?= data/photos
NOTEBOOKS := $(wildcard notebooks/*.ipynb)

.PHONY: demo test lab clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e ".[lab,test]"
	touch $(STAMP)

# Make the quick data set if it is missing, then run the main job on it.
demo: $(STAMP)
	LABKIT_QUICK=$${LABKIT_QUICK-1} $(BIN)/labkit demo --data $(DATA)

# Unit tests, then every notebook under nbval in quick mode; the sanitize file keeps paths,
# addresses and timings out of the comparison of the cells marked # NBVAL_CHECK_OUTPUT.
test: $(STAMP)
	LABKIT_QUICK=1 $(BIN)/python -m pytest tests $(if $(NOTEBOOKS),--nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg $(NOTEBOOKS))

# The course: JupyterLab on notebooks/ (quick mode unless LABKIT_QUICK=0).
lab: $(STAMP)
	@echo "Opening JupyterLab on notebooks/. Open the http://localhost:... URL it prints below (with its"
	@echo "token) in your browser, and start with 00_start_here.ipynb. Ctrl-C twice stops it."
	$(BIN)/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)
