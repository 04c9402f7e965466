"""What every command shares (skmpt.cli.common): integer arguments, input and output files, the process group."""

import argparse
import contextlib
import io
import os

import pytest
import torch.distributed as dist

import skmpt.distributed
from skmpt.cli import UsageError
from skmpt.cli.common import (
    atomic_output,
    check_outputs,
    integer,
    non_negative_int,
    positive_int,
    process_group,
    read_lines,
)


# --- integer arguments ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", [integer, positive_int, non_negative_int])
@pytest.mark.parametrize("text", ["2.7", "1.5", "True", "nan", "", "3e2"])
def test_a_non_integer_is_named_in_the_message(kind, text):
    with pytest.raises(argparse.ArgumentTypeError) as error:
        kind(text)
    assert str(error.value) == f"{text!r} is not an integer"


@pytest.mark.parametrize(
    "kind, text, message",
    [
        (positive_int, "0", "must be a positive integer; got 0"),
        (positive_int, "-1", "must be a positive integer; got -1"),
        (non_negative_int, "-1", "must be a non-negative integer; got -1"),
    ],
)
def test_an_integer_out_of_range_is_named_in_the_message(kind, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as error:
        kind(text)
    assert str(error.value) == message


def test_integers_in_range_are_read():
    assert [integer("-3"), positive_int("3"), non_negative_int("0"), non_negative_int("3")] == [-3, 3, 0, 3]
    assert all(type(kind("3")) is int for kind in (integer, positive_int, non_negative_int))


def test_argparse_names_the_option_and_the_value(capsys):
    parser = argparse.ArgumentParser(prog="skmpt demo")
    parser.add_argument("--n", type=positive_int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--n", "0"])
    assert "skmpt demo: error: argument --n: must be a positive integer; got 0" in capsys.readouterr().err
    assert parser.parse_args(["--n", "3"]).n == 3


# --- atomic_output ---------------------------------------------------------------------------


def test_a_writer_that_raises_leaves_no_file_and_the_old_one_intact(tmp_path):
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    old.write_text("precious\n")
    for exception in (ValueError("bad row"), KeyboardInterrupt()):
        with pytest.raises(type(exception)):
            with atomic_output(old, new, overwrite=True) as [old_file, new_file]:
                new_file.write(b"half")
                old_file.write(b"half")
                raise exception
        assert old.read_text() == "precious\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"]  # no temporaries, no partial file


def test_files_are_written_together_when_the_block_ends(tmp_path):
    paths = [tmp_path / "a.csv", tmp_path / "b.png"]
    with atomic_output(*paths) as files:
        for path, file in zip(paths, files, strict=True):
            file.write(path.name.encode())
        assert not any(path.exists() for path in paths)  # nothing before the block ends
    assert [path.read_text() for path in paths] == ["a.csv", "b.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.png"]


def test_a_file_that_appears_meanwhile_is_not_overwritten(tmp_path):
    path, other = tmp_path / "curve.csv", tmp_path / "curve.png"
    with pytest.raises(UsageError, match="curve.csv' appeared while the command ran; pass --force to overwrite it"):
        with atomic_output(other, path) as files:
            for file in files:
                file.write(b"new")
            path.write_text("someone else's\n")
    assert path.read_text() == "someone else's\n" and not other.exists()  # neither file is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv"]


def test_overwrite_keeps_permissions_and_a_symbolic_link(tmp_path):
    target, link = tmp_path / "kept" / "curve.csv", tmp_path / "curve.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link.symlink_to(target)
    with atomic_output(link, overwrite=True) as [file]:
        file.write(b"new\n")
    assert link.is_symlink() and link.resolve() == target and target.read_text() == "new\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in target.parent.iterdir()) == ["curve.csv"]


def test_a_new_file_gets_the_permissions_of_open(tmp_path):
    with atomic_output(tmp_path / "new.csv") as [file]:
        file.write(b"x")
    (tmp_path / "plain.csv").write_bytes(b"x")
    assert (tmp_path / "new.csv").stat().st_mode == (tmp_path / "plain.csv").stat().st_mode


# --- check_outputs ---------------------------------------------------------------------------


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("a b\n")
    return path


def test_an_existing_output_is_kept_unless_overwrite(texts, tmp_path):
    out = tmp_path / "curve.csv"
    out.write_text("precious\n")
    with pytest.raises(UsageError, match=r"^--out '.*curve.csv' exists; pass --force to overwrite it$"):
        check_outputs({"--texts": texts}, {"--out": out})
    check_outputs({"--texts": texts}, {"--out": out}, overwrite=True)
    assert out.read_text() == "precious\n"


def test_the_input_is_never_an_output_whatever_its_spelling(texts, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link.txt"
    link.symlink_to(texts)
    for spelling in (texts, "texts.txt", "./texts.txt", str(tmp_path / "." / "texts.txt"), link):
        with pytest.raises(UsageError, match="is the --texts input; it is never written to"):
            check_outputs({"--texts": texts}, {"--out": spelling}, overwrite=True)
    with pytest.raises(UsageError, match="^--plot 'texts.txt' is the --texts input"):
        check_outputs({"--texts": texts}, {"--out": "curve.csv", "--plot": "texts.txt"}, overwrite=True)
    assert texts.read_text() == "a b\n"


@pytest.mark.parametrize(
    "outputs, message",
    [
        ({"--out": "no-dir/curve.csv"}, r"^--out 'no-dir/curve.csv': the directory '.*no-dir' does not exist$"),
        ({"--out": "."}, r"^--out '\.' is a directory$"),
        ({"--out": "curve.csv", "--plot": "./curve.csv"}, "^--plot and --out are the same file$"),
    ],
)
def test_an_output_that_cannot_be_written_is_named(texts, tmp_path, monkeypatch, outputs, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=message):
        check_outputs({"--texts": texts}, outputs, overwrite=True)


def test_standard_streams_and_options_not_given_are_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("a file named '-'\n")
    check_outputs({"--texts": "-"}, {"--out": "-", "--plot": None})
    check_outputs({"--texts": "-"}, {"--out": "curve.csv"})


# --- read_lines ------------------------------------------------------------------------------


def test_read_lines_keeps_blank_lines_and_drops_line_breaks(tmp_path, monkeypatch):
    path = tmp_path / "texts.txt"
    path.write_bytes("a b\r\n\nb \u00e9\n".encode())
    assert read_lines(path, "--texts") == ["a b", "", "b \u00e9"]
    monkeypatch.setattr("sys.stdin", io.StringIO("x\n\ny"))
    assert read_lines("-", "--texts") == ["x", "", "y"]


def test_read_lines_names_a_bad_input(tmp_path):
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"ok\n\xff\xfe\n")
    for path, message in [
        (tmp_path / "missing.txt", r"^--texts '.*missing.txt': no such file$"),
        (tmp_path, r"^--texts '.*' is a directory, not a file of texts$"),
        (binary, r"^--texts '.*binary.txt' is not UTF-8 text: invalid start byte at byte 3$"),
    ]:
        with pytest.raises(UsageError, match=message):
            read_lines(path, "--texts")


# --- process_group ---------------------------------------------------------------------------


def _no_launcher(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_without_a_launcher_the_command_is_one_process(monkeypatch):
    _no_launcher(monkeypatch)
    with process_group("cpu") as context:
        assert (context.rank, context.world_size, context.is_main) == (0, 1, True)
        assert not dist.is_initialized()
    assert not dist.is_initialized()


def _joining(context):
    """``init_distributed`` as a launcher of one process: it joins a real gloo group."""

    def init_distributed(device):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        return context

    return init_distributed


@pytest.mark.parametrize("fails", [False, True])
def test_a_group_joined_for_the_command_is_left_when_it_ends(monkeypatch, fails):
    _no_launcher(monkeypatch)
    with process_group("cpu") as context:
        pass
    # process_group imports init_distributed when it runs (its module imports torch): patched where it is defined
    monkeypatch.setattr(skmpt.distributed, "init_distributed", _joining(context))
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with process_group("cpu"):
            assert dist.is_initialized() and dist.get_world_size() == 1
            if fails:
                raise RuntimeError("a rank failed")
    assert not dist.is_initialized()  # destroyed before the command returns, whether it failed or not


def test_a_group_joined_by_the_caller_is_left_to_the_caller(monkeypatch):
    _no_launcher(monkeypatch)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with process_group("cpu") as context:
            assert context.world_size == 1
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()


def test_under_a_launcher_no_thread_outlives_the_group(monkeypatch):
    tqdm = pytest.importorskip("tqdm").tqdm
    monkeypatch.setattr(tqdm, "monitor_interval", 10)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    with process_group("cpu") as context:
        assert context.world_size == 1
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false" and tqdm.monitor_interval == 0
