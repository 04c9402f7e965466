"""``skmpt lm-eval``: lm-eval's flags, a local task run offline, the estimates in the logged samples."""

import importlib
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("lm_eval")

from support.text import model_dir  # noqa: E402, F401

from skmpt.cli import COMMANDS, main  # noqa: E402


@pytest.fixture
def include_path(tmp_path):
    docs = [{"context": "a b a", "choices": ["b a", "a a b b"], "label": 0},
            {"context": "b b", "choices": ["a", "b b b"], "label": 1}]
    (tmp_path / "mc.jsonl").write_text("\n".join(json.dumps(doc) for doc in docs), encoding="utf-8")
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "toy_mc.yaml").write_text(
        f"task: toy_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tmp_path / 'mc.jsonl'}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{context}}'\n"
        "doc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\nmetric_list:\n  - metric: acc\n",
        encoding="utf-8")
    return folder


@pytest.fixture
def local_tasks_only(monkeypatch):
    """lm-eval's task index without lm-eval's own ~15,000 tasks, whose indexing takes 6 s of CPU per run.

    For the tests that read only the local task (and an unknown name); the first end-to-end test keeps
    lm-eval's own tasks beside it, as a user's run does.
    """
    import lm_eval.tasks

    class LocalTaskManager(lm_eval.tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, include_defaults=False, **kwargs)

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", LocalTaskManager)


def test_lm_eval_is_a_command():
    assert COMMANDS["lm-eval"] == "skmpt.cli.lm_eval"


@pytest.mark.installed  # lm-eval finds the model "skmpt" that the installed wheel registers, in CI
def test_a_local_task_runs_and_its_samples_carry_the_estimates(model_dir, include_path, tmp_path, capsys,  # noqa: F811
                                                               monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = tmp_path / "out"
    status = main(["lm-eval", "--model_args", f"pretrained={model_dir},max_forward_passes=8", "--tasks", "toy_mc",
                   "--include_path", str(include_path), "--output_path", str(out), "--log_samples", "--seed", "3"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "toy_mc: 3 of 4 requests exact" in captured.out
    assert "estimators: adjusted 1, exhaustive 3" in captured.out  # the standard: no candidate, no pilot
    assert "reached target_se" not in captured.out  # no target asked for
    samples = [json.loads(line) for path in out.rglob("samples_toy_mc_*.jsonl") for line in path.open()]
    assert len(samples) == 2
    fields = [field for sample in samples for field in sample["skmpt"]]
    assert sum(field["exact"] for field in fields) == 3 and all(field["forward_passes"] > 0 for field in fields)
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["skmpt"]["toy_mc"]["requests"] == 4


def test_the_summary_is_printed_without_log_samples(model_dir, include_path, capsys, monkeypatch,  # noqa: F811
                                                    local_tasks_only):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    status = main(["lm-eval", "--model_args", f"pretrained={model_dir},max_forward_passes=8", "--tasks", "toy_mc",
                   "--include_path", str(include_path)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "toy_mc: 3 of 4 requests exact" in captured.out


def test_the_summary_counts_the_requests_that_reached_target_se(model_dir, include_path, capsys,  # noqa: F811
                                                                monkeypatch, local_tasks_only):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # 1e-9 nats: the three exact requests reach it, the Monte Carlo one spends its 8 passes without reaching it
    status = main(["lm-eval", "--model_args", f"pretrained={model_dir},max_forward_passes=8,target_se=1e-9",
                   "--tasks", "toy_mc", "--include_path", str(include_path)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "toy_mc: 3 of 4 requests exact" in captured.out
    assert "3 of 4 requests reached target_se" in captured.out


@pytest.mark.parametrize("extra, message", [
    (["--include_path", "no/such/folder"], "is not a folder"),
    (["--log_samples"], "--log_samples needs --output_path"),
    (["--limit", "0"], "--limit must be positive"),
    (["--seed", str(2**32)], "argument --seed: must be an integer in [0, 2**32); got 4294967296"),
])
def test_bad_arguments_are_usage_errors(extra, message, capsys):
    assert main(["lm-eval", "--tasks", "toy_mc", *extra]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_task_is_named(include_path, capsys, local_tasks_only):
    assert main(["lm-eval", "--tasks", "no_such_task", "--include_path", str(include_path)]) == 2
    assert "unknown task 'no_such_task'" in capsys.readouterr().err


def test_lm_eval_is_imported_only_when_used():
    code = ("import sys, skmpt.text, skmpt.cli; skmpt.cli._parser(); "
            "assert 'lm_eval' not in sys.modules and 'skmpt.text.harness' not in sys.modules")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=environment)


def test_without_lm_eval_the_error_names_the_extra(monkeypatch):
    for name in ("lm_eval", "lm_eval.api", "lm_eval.api.model", "lm_eval.api.registry"):
        monkeypatch.setitem(sys.modules, name, None)  # as if lm-eval were not installed
    monkeypatch.delitem(sys.modules, "skmpt.text.harness", raising=False)
    with pytest.raises(ImportError, match=r'pip install "skmpt\[eval\]"'):
        importlib.import_module("skmpt.text.harness")


def test_a_missing_data_file_is_named_before_the_model_loads(include_path, tmp_path, capsys, local_tasks_only):
    """The YAML's relative path is read from the current folder; the model (here none: a path that does not
    exist) is never reached."""
    (include_path / "toy_mc.yaml").write_text(
        (include_path / "toy_mc.yaml").read_text(encoding="utf-8").replace(str(tmp_path / "mc.jsonl"),
                                                                           "data/mc.jsonl"), encoding="utf-8")
    status = main(["lm-eval", "--model_args", f"pretrained={tmp_path / 'no_model'}", "--tasks", "toy_mc",
                   "--include_path", str(include_path)])
    err = capsys.readouterr().err
    assert status == 2
    assert "task 'toy_mc' reads 'data/mc.jsonl'" in err and "current folder" in err and "toy_mc.yaml" in err
