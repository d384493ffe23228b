"""Writing a figure: the format by the file's extension, no timestamp and fixed SVG ids (the same figure gives
the same bytes), written whole or not at all."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from npusim.output import files  # noqa: E402

FORMATS = (".png", ".svg", ".pdf")


def figure_bytes(fig, fmt: str, dpi: int = 110) -> bytes:
    """The figure in `fmt` (png, svg, pdf) with no date or software stamp and fixed SVG ids (svg.hashsalt):
    the same figure gives the same bytes. Closes the figure."""
    meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}[fmt]
    buf = io.BytesIO()
    try:
        with matplotlib.rc_context({"svg.hashsalt": "kda-npusim"}):
            fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    finally:
        plt.close(fig)
    return buf.getvalue()


def save(fig, path: str | Path, dpi: int = 110, option: str = "--plot") -> Path:
    """Write by extension (.png, .svg, .pdf) and close the figure: drawn in memory first, then written whole
    or not at all (npusim/output/files.py: OutputError naming `option`)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        plt.close(fig)
        raise ValueError(f"{path}: a figure file must end in {', '.join(FORMATS)}")
    return files.write_bytes(option, path, figure_bytes(fig, path.suffix.lower()[1:], dpi))


def png_bytes(fig, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (no timestamp: the same figure gives the same bytes), and close it; for
    notebooks: IPython.display.Image(png_bytes(fig))."""
    return figure_bytes(fig, "png", dpi)
