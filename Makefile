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

# Unit tests, then every notebook under nbval in quick mode.
test: $(STAMP)
	LABKIT_QUICK=1 $(BIN)/python -m pytest tests $(if $(NOTEBOOKS),--nbval-lax $(NOTEBOOKS))

lab: $(STAMP)
	mkdir -p notebooks
	$(BIN)/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)
