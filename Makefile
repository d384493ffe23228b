# Two commands on a fresh machine:  `make run`  (the main job)  and  `make test`.
PY := .venv/bin/python
ARGS ?= --version v3 --chunks 16

.PHONY: run test bench notebooks clean
.venv/.stamp: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

run: .venv/.stamp
	$(PY) -m kda.run $(ARGS)

test: .venv/.stamp
	$(PY) -m pytest

bench: .venv/.stamp
	$(PY) -m pip --disable-pip-version-check -q install -e ".[bench]"
	$(PY) benchmarks/scale.py
	$(PY) benchmarks/replay_speed.py
	$(PY) benchmarks/uncertainty.py

notebooks: .venv/.stamp
	$(PY) scripts/execute_notebooks.py

clean:
	rm -rf .venv build *.egg-info .pytest_cache .hypothesis
