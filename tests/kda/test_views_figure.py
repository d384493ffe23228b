"""Figures written by extension: PNG, SVG and PDF files carry their format's magic bytes, the same figure gives
the same bytes (no timestamp), and a file of another extension is refused with a line naming it."""
import matplotlib.pyplot as plt
import pytest

from kda.views.figure import figure_bytes, png_bytes, save

MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-"}


def _fig():
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1, 2], [0, 1, 4])
    ax.set_title("a small figure")
    return fig


@pytest.mark.parametrize("suffix", [".png", ".pdf"])
def test_save_writes_the_format_its_extension_names(tmp_path, suffix):
    path = save(_fig(), tmp_path / f"f{suffix}", dpi=40)
    assert path.read_bytes().startswith(MAGIC[suffix])


def test_save_writes_an_svg_that_holds_the_title(tmp_path):
    text = save(_fig(), tmp_path / "f.SVG", dpi=40).read_text(encoding="utf-8")
    assert "<svg" in text and "</svg>" in text
    assert "a small figure" in text                  # matplotlib keeps the title as a comment or text


def test_the_same_figure_gives_the_same_bytes():
    for fmt in ("png", "svg", "pdf"):
        assert figure_bytes(_fig(), fmt, dpi=40) == figure_bytes(_fig(), fmt, dpi=40), fmt


def test_png_bytes_is_a_png_and_closes_the_figure():
    fig = _fig()
    data = png_bytes(fig, dpi=40)
    assert data.startswith(MAGIC[".png"])
    assert not plt.fignum_exists(fig.number)


def test_an_unknown_extension_is_refused_and_nothing_written(tmp_path):
    fig = _fig()
    with pytest.raises(ValueError, match=r"f\.jpg: a figure file must end in \.png, \.svg, \.pdf"):
        save(fig, tmp_path / "f.jpg")
    assert not (tmp_path / "f.jpg").exists()
    assert not plt.fignum_exists(fig.number)
