# M3Builder: `make run` starts the app on the demo data; `make test` runs the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: setup demo run test test-fast clean-venv

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -r requirements.txt -c constraints.txt
	touch $@

demo: setup
	$(PY) -m crew demo

run: demo
	$(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT)

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

clean-venv:
	rm -rf $(VENV)
