# M3Builder: `make run` starts the app on the demo data; `make test` runs the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: setup demo run test test-fast m3bench bench bench-expert bench-ui fuzz faults clean-venv

VIEWER := components/viewer

setup: $(VENV)/.installed $(VIEWER)/node_modules/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -r requirements.txt -c constraints.txt
	touch $@

# the image viewer's library (Niivue, version and hash pinned in package-lock.json, checked by
# npm ci); without npm the Preview page shows static slices instead
$(VIEWER)/node_modules/.installed: $(VIEWER)/package-lock.json
	@if command -v npm >/dev/null 2>&1 && npm ci --prefix $(VIEWER) --ignore-scripts \
		--omit=optional --no-audit --no-fund --loglevel=error; then touch $@; else echo \
		"The image viewer was not installed (npm missing or the npm registry unreachable):" \
		"the Preview page shows static slices. Install Node.js and npm, then run make setup."; fi

demo: setup
	$(PY) -m crew demo

# DEV=1: reload the app when a source file changes (the watcher costs CPU while idle)
run: demo
	$(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT) \
		$(if $(DEV),--server.fileWatcherType auto --server.runOnSave true)

test: setup
	$(PY) -m pytest -q --durations=25 -n 2 --dist loadfile --no-loadscope-reorder

test-fast: setup
	$(PY) -m pytest -q -m "not slow" -n 2 --dist loadfile --no-loadscope-reorder

# M3Bench-lite through the crew (autopilot; RUNS=5 for the paper's protocol, ONLY=ADNI,BTCV,
# SUITE=paper or layout-families for either part)
m3bench: setup
	$(PY) -m crew bench --suite $(or $(SUITE),m3bench-lite) --runs $(or $(RUNS),1) $(if $(ONLY),--only $(ONLY))

# fuzzed registrations: EXAMPLES generated bad or odd dataset folders (default 1000); totals
fuzz: setup
	$(PY) -m bench.fuzz_registration --examples $(or $(EXAMPLES),1000)

# what a clinician waits for, in Chromium: first paint, request -> plan, approve -> model
# (median of RUNS, default 5), idle CPU; warm standby worker vs cold starts
bench-ui: setup
	$(PY) -m bench.ui_timings --runs $(or $(RUNS),5)

# the escape corpus, the fault suite and the fuzzed registrations, with totals
faults: setup
	$(PY) -m bench.fault_suite --fuzz-examples $(or $(EXAMPLES),1000)

# scale bench: scan + index 100,000 synthetic images per layout (FILES=... to change)
bench: setup
	$(PY) -m bench.scan_scale --files $(or $(FILES),100000)

# system vs hand-written MONAI expert baselines (and nnU-Net) on 2D/3D diagnosis and 3D
# segmentation: wall time, metric, accuracy at threshold, samples/s, ECE (QUICK=1: smoke run)
bench-expert: setup
	$(PY) -m bench.vs_expert $(if $(QUICK),--quick)

clean-venv:
	rm -rf $(VENV)
