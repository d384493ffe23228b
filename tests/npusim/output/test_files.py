"""A file a command writes: refused before the work in one line naming the option, and written whole, its old
content kept when the write fails."""
import os

import pytest

from npusim.output.files import OutputError, check_writable, same_file, write_bytes, write_text


def test_a_path_that_cannot_be_a_file_is_refused_naming_the_option(tmp_path):
    for path, says in ((tmp_path, "a directory, not a file"), (tmp_path / "missing" / "t.json", "no directory")):
        with pytest.raises(OutputError, match=says) as err:
            check_writable("--trace", path)
        assert str(err.value).startswith(f"--trace {path}:") and "\n" not in str(err.value)
    check_writable("--trace", tmp_path / "t.json")                  # a new file in a folder one can write
    assert not (tmp_path / "t.json").exists() and os.listdir(tmp_path) == []   # the probe left nothing


def test_a_write_replaces_the_file_whole_and_follows_a_link(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    write_text("--csv", link, "new\n")
    assert target.read_text() == "new\n" and link.is_symlink() and same_file(link, target)
    assert sorted(os.listdir(tmp_path)) == ["link.csv", "out.csv"]      # no temporary file left beside it


def test_a_failed_write_leaves_what_was_there_and_no_temporary_file(tmp_path):
    there = tmp_path / "out.png"
    there.mkdir()                                       # the move into place fails: a folder is in the way
    (there / "kept").write_text("x")
    with pytest.raises(OutputError, match="nothing was written"):
        write_bytes("--plot", there, b"data")
    assert (there / "kept").read_text() == "x" and os.listdir(tmp_path) == ["out.png"]
    with pytest.raises(OutputError, match="nothing was written"):
        write_bytes("--plot", tmp_path / "gone" / "p.png", b"data")
