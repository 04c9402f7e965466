"""The command line: outputs never overwritten or left half-written, arguments checked before the model loads."""

import csv
import importlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import TEXTS  # noqa: E402
from transformers import BertForMaskedLM  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.masks import parse_mask_rates  # noqa: E402
from skmpt.text import DEFAULT_MASK_RATES  # noqa: E402
import skmpt.text.scorer  # noqa: E402
from skmpt.cli import COMMANDS, main  # noqa: E402
from skmpt.cli import mlm_curve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]



@pytest.fixture
def texts_file(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def run(model_dir, texts, out, *extra):
    return main(["mlm-curve", "--model", str(model_dir), "--texts", str(texts), "--out", str(out),
                     "--mask-rates", "0.25,0.5", "--score-masks", "2", "--device", "cpu", *extra])


def one_line_error(capsys, start="skmpt mlm-curve: error: "):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(start) and "Traceback" not in err, err
    return err


def test_rows_carry_line_numbers_and_blank_lines_have_empty_cells(model_dir, texts_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.csv"
    assert run(model_dir, texts_file, out, "--plot", str(tmp_path / "curve.png"), "--quiet") == 0
    assert capsys.readouterr().err == ""  # --quiet: no bar, no message
    rows = list(csv.reader(out.open(encoding="utf-8")))
    assert rows[0] == ["line", "n_tokens", "score", "paper_area", "S@0.25", "S@0.5"]
    assert [row[0] for row in rows[1:]] == ["1", "2", "3", "4", "5"]
    assert rows[2][1:] == rows[4][1:] == [""] * 5
    scorer = MLMCurveScorer(str(model_dir), mask_rates=[0.25, 0.5], score_masks=2, random_state=0, device="cpu").fit()
    texts = [TEXTS[0], TEXTS[2], TEXTS[4]]
    written = np.array([[float(v) for v in rows[i][1:]] for i in (1, 3, 5)])
    np.testing.assert_array_equal(written[:, 0], [4, 3, 1])
    np.testing.assert_allclose(written[:, 1], scorer.score_samples(texts), rtol=1e-12)
    np.testing.assert_allclose(written[:, 3:], scorer.transform(texts), rtol=1e-12)
    assert (tmp_path / "curve.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv", "curve.png", "texts.txt"]  # no temporaries


def test_existing_outputs_and_the_input_are_never_overwritten(model_dir, texts_file, tmp_path, capsys):
    out, plot = tmp_path / "curve.csv", tmp_path / "curve.png"
    out.write_text("precious\n")
    assert run(model_dir, texts_file, out) == 2
    assert "exists; pass --force to overwrite it" in one_line_error(capsys)
    assert out.read_text() == "precious\n"
    plot.write_text("precious\n")
    assert run(model_dir, texts_file, tmp_path / "new.csv", "--plot", str(plot)) == 2
    assert "--plot" in one_line_error(capsys) and not (tmp_path / "new.csv").exists()
    for target in (["--force"], ["--force", "--plot", str(texts_file)]):
        destination = texts_file if target == ["--force"] else out
        assert run(model_dir, texts_file, destination, *target) == 2
        assert "is the --texts input; it is never written to" in one_line_error(capsys)
    assert texts_file.read_text(encoding="utf-8") == "\n".join(TEXTS) + "\n"
    assert run(model_dir, texts_file, out, "--force", "--quiet") == 0
    assert out.read_text().startswith("line,n_tokens")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--texts", "missing.txt"], "--texts 'missing.txt': no such file"),
        (["--out", "no-dir/curve.csv"], "the directory '.*no-dir' does not exist"),
        (["--mask-rates", "0:1:0"], "argument --mask-rates: the step of mask rates '0:1:0' must be positive"),
        (["--mask-rates", "0,0.5"], r"mask_rates must lie in \(0, 1\) \(exclusive\); got 0.0 \(from '0,0.5'\)"),
        (["--mask-rates", "0.5,1"], r"got 1.0 \(from '0.5,1'\)"),
        (["--mask-rates", "0.5,1.5"], "got 1.5"),
        (["--mask-rates", ""], "mask rates '' are not 'start:stop:step'"),
        (["--mask-rates", "0.5,0.2"], "strictly increasing"),
        (["--mask-rates", "0:0.5:1e-9"], "give more than 10000 rates"),
        (["--score-masks", "0"], "argument --score-masks: must be a positive integer; got 0"),
        (["--score-masks", "-3"], "argument --score-masks: must be a positive integer; got -3"),
        (["--score-batch-size", "0"], "argument --score-batch-size: must be a positive integer; got 0"),
        (["--n-masks", "2"], "unrecognized arguments: --n-masks"),
        (["--plot", "-"], "--plot must be a file"),
        (["--max-length", "1"], "argument --max-length: must be at least 2"),
        (["--random-state", "-1"], r"argument --random-state: must be an integer in \[0, 2\*\*32\); got -1"),
        (["--random-state", str(2**32)], r"argument --random-state: must be an integer in \[0, 2\*\*32\)"),
        (["--model", "./no-such-model"], "--model='./no-such-model' is a path that does not exist"),
        (["--device", "tpu"], None),  # checked by the scorer: a runtime error, exit 1
    ],
)
def test_bad_arguments_fail_before_the_model_loads(model_dir, texts_file, tmp_path, capsys, monkeypatch, args,
                                                   message):
    monkeypatch.chdir(tmp_path)
    loads = []
    monkeypatch.setattr(skmpt.text.scorer, "load_masked_lm", lambda *args, **kwargs: loads.append(1))
    options = {"--model": str(model_dir), "--texts": str(texts_file), "--out": "curve.csv", "--device": "cpu"}
    options.update(zip(args[::2], args[1::2], strict=True))
    status = main(["mlm-curve", *(x for pair in options.items() for x in pair)])
    err = one_line_error(capsys, start="skmpt")
    assert loads == [] and not (tmp_path / "curve.csv").exists()
    if message is None:
        assert status == 1 and "device must be" in err
    else:
        assert status == 2 and re.search(message, err), err


def test_runtime_errors_exit_1_and_debug_shows_the_traceback(model_dir, texts_file, tmp_path, capsys):
    weights_only = tmp_path / "weights-only"
    BertForMaskedLM.from_pretrained(model_dir).save_pretrained(weights_only)
    capsys.readouterr()
    assert run(weights_only, texts_file, tmp_path / "curve.csv") == 1
    stage, err = capsys.readouterr().err.split("\n", 1)  # the stage it failed in, then the error on one line
    assert stage == f"loading: the model {weights_only}" and err.count("\n") == 1 and "Traceback" not in err
    assert "No tokenizer was found in model=" in err and "(--tokenizer on the command line)" in err
    with pytest.raises(ValueError, match="No tokenizer was found"):
        run(weights_only, texts_file, tmp_path / "curve.csv", "--debug")
    capsys.readouterr()
    texts_file.write_text("a b\n\nb [MASK] a\n", encoding="utf-8")
    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--quiet") == 1
    assert "line 3 contains the special token '[MASK]'" in one_line_error(capsys)
    assert not (tmp_path / "curve.csv").exists()


def test_an_interrupted_run_leaves_no_file(model_dir, texts_file, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(mlm_curve, "_plot", interrupted)  # the CSV is written, the figure is not
    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--plot", str(tmp_path / "curve.png"), "--quiet") == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["texts.txt"]


def test_stdout_progress_and_help(model_dir, texts_file, capsys):
    assert run(model_dir, texts_file, "-", "--score-batch-size", "2") == 0
    captured = capsys.readouterr()
    rows = list(csv.reader(io.StringIO(captured.out)))
    assert rows[0][0] == "line" and len(rows) == 6  # only the CSV on standard output
    assert "scoring" in captured.err and "3 texts, 2 blank line(s), mean score" in captured.err
    with pytest.raises(SystemExit) as exit_info:
        main(["mlm-curve", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for default in ("(default: 10)", "(default: 0.01:0.99:0.01)", "(default: sweep)", "(default: 64)",
                    "(default: 16384)", "(default: 512)", "(default: auto)", "(default: 0)"):
        assert default in text, default
    # the spelled-out default is the scorer's
    np.testing.assert_array_equal(parse_mask_rates(mlm_curve.DEFAULT_RATES), DEFAULT_MASK_RATES)


def test_help_lists_the_table_of_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert COMMANDS and all(name in out for name in COMMANDS)
    for module_name in COMMANDS.values():  # each command declares its interface
        module = importlib.import_module(module_name)
        assert callable(module.add_arguments) and callable(module.run) and module.HELP in " ".join(out.split())
    assert main(["no-such-command"]) == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err


@pytest.mark.installed  # the entry points of the installed wheel, in CI
def test_console_script_and_python_m(model_dir, texts_file):
    # the worktree's skmpt, not an installed copy, runs in the subprocesses
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    script = Path(sys.executable).with_name("skmpt")
    if not script.exists():
        pytest.skip("the skmpt console script is not installed beside this Python")
    done = subprocess.run([str(script), "mlm-curve", "--model", str(model_dir), "--texts", str(texts_file), "--out",
                           "-", "--mask-rates", "0.5", "--score-masks", "1", "--device", "cpu", "--quiet"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "line,n_tokens,score,paper_area,S@0.5" and len(done.stdout.splitlines()) == 6
    import skmpt

    done = subprocess.run([sys.executable, "-m", "skmpt", "--version"], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout.strip()) == (0, f"skmpt {skmpt.__version__}")
    done = subprocess.run([sys.executable, "-m", "skmpt", "mlm-curve", "--model", "m", "--texts", "t", "--out", "o",
                           "--mask-rates", "0:1:0"], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# --- errors found before scoring, --force and symbolic links ---------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--texts", "."], r"--texts '\.' is a directory, not a file of texts"),
        (["--plot", "curve.xyz"], r"--plot 'curve.xyz': matplotlib cannot write .xyz files; use one of .*png"),
    ],
)
def test_a_directory_of_texts_and_an_unwritable_plot_fail_before_scoring(model_dir, texts_file, tmp_path, capsys,
                                                                         monkeypatch, args, message):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    loads = []
    monkeypatch.setattr(skmpt.text.scorer, "load_masked_lm", lambda *args, **kwargs: loads.append(1))
    options = {"--model": str(model_dir), "--texts": str(texts_file), "--out": "curve.csv", "--device": "cpu"}
    options.update(zip(args[::2], args[1::2], strict=True))
    assert main(["mlm-curve", *(x for pair in options.items() for x in pair)]) == 2
    assert re.search(message, one_line_error(capsys)) and loads == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["texts.txt"]


def test_a_plot_extension_in_capitals_is_written(model_dir, texts_file, tmp_path):
    pytest.importorskip("matplotlib")
    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--plot", str(tmp_path / "curve.PDF"), "--quiet") == 0
    assert (tmp_path / "curve.PDF").read_bytes().startswith(b"%PDF")


def test_force_keeps_permissions_and_writes_through_a_symbolic_link(model_dir, texts_file, tmp_path):
    target, link = tmp_path / "kept" / "curve.csv", tmp_path / "curve.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link.symlink_to(target)
    assert run(model_dir, texts_file, link, "--force", "--quiet") == 0
    assert link.is_symlink() and link.resolve() == target  # the link stays; the file it names is replaced
    assert target.read_text().startswith("line,n_tokens") and oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in target.parent.iterdir()) == ["curve.csv"]  # no temporaries


def test_max_length_without_room_for_a_token_is_an_error(model_dir, texts_file, tmp_path, capsys):
    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--max-length", "2", "--quiet") == 1
    assert "max_length=2 leaves no room for a token" in one_line_error(capsys)
    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--max-length", "3", "--quiet") == 0


def test_a_long_line_is_warned_about_once_and_verbose_0_shows_no_bar(model_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a b a b a b a b a b a b a b a b a b a b\na b\n", encoding="utf-8")
    assert run(model_dir, texts, tmp_path / "curve.csv", "--max-length", "8") == 0
    err = capsys.readouterr().err
    assert err.count("were truncated") == 1, err
    assert run(model_dir, texts, tmp_path / "quiet.csv", "--max-length", "8", "--quiet") == 0
    assert capsys.readouterr().err.splitlines() == [  # --quiet: no bar, but the warning stays
        "skmpt: warning: 1 of 2 texts are longer than max_length=8 tokens and were truncated."
    ]
    from transformers.utils import logging as transformers_logging

    assert transformers_logging.is_progress_bar_enabled()  # the bars' state is restored
    MLMCurveScorer(str(model_dir), device="cpu", verbose=0).fit()
    assert "Loading weights" not in capsys.readouterr().err
    MLMCurveScorer(str(model_dir), device="cpu", verbose=1).fit()
    assert "Loading weights" in capsys.readouterr().err


def test_each_progress_bar_says_its_stage_and_quiet_hides_the_libraries_bars(model_dir, texts_file, tmp_path, capsys,
                                                                             monkeypatch):
    from huggingface_hub import utils as hub
    from transformers.utils import logging as transformers_logging

    assert run(model_dir, texts_file, tmp_path / "curve.csv", "--pll", "original") == 0
    err = capsys.readouterr().err
    assert f"loading: the model {model_dir}" in err and "Loading weights" in err
    assert "scoring: 3 texts, the curve S(x; M), then the score, then the pseudo-log-likelihood" in err
    for strategy in ("CurveMasks", "SweepMasks", "SingleTokenMasks"):
        assert f"scoring ({strategy})" in err, strategy
    seen = []  # the state of the libraries' bars while the command runs
    fit = MLMCurveScorer.fit
    monkeypatch.setattr(MLMCurveScorer, "fit", lambda self, *a: seen.append(
        (hub.are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled())) or fit(self, *a))
    assert run(model_dir, texts_file, tmp_path / "quiet.csv", "--pll", "original", "--quiet") == 0
    assert capsys.readouterr().err == "" and seen == [(True, False)]
    assert not hub.are_progress_bars_disabled() and transformers_logging.is_progress_bar_enabled()  # restored


def test_the_model_antiberty_is_the_installed_antiberty(tmp_path, capsys):
    pytest.importorskip("antiberty")
    texts = tmp_path / "chains.txt"
    texts.write_text("EVQLVESGGGLVQPGG\n", encoding="utf-8")
    assert main(["mlm-curve", "--model", "antiberty", "--texts", str(texts), "--out", "-", "--mask-rates", "0.5",
                 "--score-masks", "2", "--device", "cpu", "--quiet", "--random-state", "0"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[1][:2] == ["1", "16"] and float(rows[1][2]) < 0


@pytest.mark.parametrize("extra", [
    [],
    ["--score-method", "chain", "--score-batch-size", "3"],
    ["--whole-word-masking", "--std"],
    ["--pll", "within_word_l2r", "--max-batch-tokens", "40"],
], ids=["sweep", "chain", "whole-words", "pll"])
def test_the_masked_copies_announced_before_scoring_are_those_scored(model_dir, texts_file, capsys, monkeypatch,
                                                                     extra):
    from skmpt.text.runner import MaskedLMRunner

    scored, passes = [], []  # the copies the runner scores, and its forward passes
    run_copies, batches = MaskedLMRunner.run_copies, MaskedLMRunner.batches

    def counted_run_copies(self, encoded, copies, **kwargs):
        scored.append(sum(len(masked) for masked, *_ in copies))
        monkeypatch.setattr(MaskedLMRunner, "batches", counted_batches)
        try:
            return run_copies(self, encoded, copies, **kwargs)
        finally:
            monkeypatch.setattr(MaskedLMRunner, "batches", batches)

    def counted_batches(self, *args, **kwargs):
        for batch in batches(self, *args, **kwargs):
            passes.append(batch)
            yield batch

    monkeypatch.setattr(MaskedLMRunner, "run_copies", counted_run_copies)
    assert run(model_dir, texts_file, "-", *extra) == 0
    err = capsys.readouterr().err
    announced = re.search(r"this run scores (\d+) masked copies in about (\d+) forward passes", err)
    assert announced and err.index("this run scores") < err.index("scoring (")
    assert int(announced.group(1)) == sum(scored) > 0
    assert int(announced.group(2)) == len(passes)


def test_dtype_names_are_the_library_s():
    from skmpt._utils import DTYPES

    assert set(mlm_curve._DTYPE_NAMES) == set(DTYPES)
