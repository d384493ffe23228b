"""Every notebook is saved with its figures: a code cell that ends by drawing a figure holds an image in its
saved outputs (a notebook saved without them shows a reader nothing)."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# a cell's last line draws: show(...), figure_...(...), or a figure returned bare
DRAWS = re.compile(r"^(show\(|figure_\w+\(|plots\.figure_\w+\()")
IMAGES = ("image/png", "image/svg+xml")


def figure_cells(path: Path) -> list[tuple[int, bool]]:
    """(cell index, holds an image) for each code cell whose last line draws a figure."""
    cells = json.loads(path.read_text())["cells"]
    out = []
    for i, cell in enumerate(cells):
        lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip() and not ln.startswith("#")]
        if cell["cell_type"] == "code" and lines and DRAWS.match(lines[-1]):
            images = any(k in o.get("data", {}) for o in cell.get("outputs", []) for k in IMAGES)
            out.append((i, images))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_cell_is_saved_with_its_image(path):
    assert [i for i, images in figure_cells(path) if not images] == []


def test_a_figure_cell_saved_without_its_image_is_found(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["x = 1\n", "show(fig)"], "outputs": []},
                    {"cell_type": "code", "source": ["show(fig)"],
                     "outputs": [{"data": {"image/png": "iVBOR"}}]},
                    {"cell_type": "code", "source": ["print(1)"], "outputs": []}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert figure_cells(path) == [(0, False), (1, True)]
