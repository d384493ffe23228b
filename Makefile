# Two commands on a fresh machine:  `make run`  (the main job)  and  `make test`.
PY := .venv/bin/python
ARGS ?= --version v3 --chunks 16

.PHONY: run test bench notebooks docs docs-figures clean
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
	$(PY) benchmarks/decode_speed.py
	$(PY) benchmarks/uncertainty.py
	$(PY) benchmarks/page_faults.py

notebooks: .venv/.stamp
	$(PY) scripts/execute_notebooks.py

# The docs site (mkdocs.yml, docs/): warnings are errors. Output in site/.
docs: .venv/.stamp
	$(PY) -m mkdocs build --strict

# Re-run every command whose output is a figure in README.md and docs/ (scripts/docs_figures.py), then
# re-execute and save the notebooks. Run it after a change that moves figures (a recalibrated profile).
docs-figures: .venv/.stamp
	$(PY) scripts/docs_figures.py
	$(PY) scripts/execute_notebooks.py

clean:
	rm -rf .venv build site *.egg-info .pytest_cache .hypothesis
