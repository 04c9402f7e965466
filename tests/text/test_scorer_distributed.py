"""MLMCurveScorer under a launcher: 2 CPU processes (gloo) give the numbers of one process."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.ranks import free_port, run_two_ranks  # noqa: E402
from support.text import TEXTS  # noqa: E402

from skmpt.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _rows(path):
    return list(csv.reader(path.open(encoding="utf-8")))


def test_command_line_under_torchrun_writes_one_complete_csv_from_rank_0(model_dir, tmp_path, capsys):  # noqa: F811
    pytest.importorskip("matplotlib")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    arguments = ["mlm-curve", "--model", str(model_dir), "--texts", str(texts), "--mask-rates", "0.25,0.5",
                 "--score-masks", "3", "--device", "cpu", "--random-state", "0"]
    one = tmp_path / "one.csv"
    assert main([*arguments, "--out", str(one), "--quiet"]) == 0

    runs = tmp_path / "runs"
    runs.mkdir()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "skmpt", *arguments,
         "--out", str(runs / "two.csv"), "--plot", str(runs / "two.png")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # One CSV and one figure, written by rank 0 alone: no second copy, no temporary left behind.
    assert sorted(p.name for p in runs.iterdir()) == ["two.csv", "two.png"]
    assert done.stderr.count("mean score") == 1, done.stderr  # the closing message, once
    two, single = _rows(runs / "two.csv"), _rows(one)
    assert two[0] == single[0] and [r[0] for r in two] == [r[0] for r in single]  # every line, in order
    for got, want in zip(two[1:], single[1:], strict=True):
        assert (got[1] == "") == (want[1] == "")  # blank lines stay blank
        if want[1]:
            # float32 encoder: a text scored in another batch differs by rounding only
            np.testing.assert_allclose(np.array(got[1:], float), np.array(want[1:], float), rtol=1e-5)


# Different lengths, 9 texts in batches of 4: the last step of an epoch holds 1 text, so rank 1 has none.
TRAIN_TEXTS = ["a b a b b", "b a", "a a b", "b b b a a b", "a", "b a b", "a b", "b b a a", "a b b"]


def _fit(**params):
    from support.text import binary_tokenizer
    from transformers import BertConfig

    from skmpt import MLMCurveScorer

    tokenizer = binary_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)  # no dropout: its draws differ per process
    # max_batch_tokens=24: a step's texts need several forward passes (gradient accumulation)
    return MLMCurveScorer(config, tokenizer=tokenizer, max_steps=3, batch_size=4, max_batch_tokens=24,
                          learning_rate=1e-2, device="cpu", random_state=0, **params).fit(TRAIN_TEXTS)


def _training_rank(rank, port, directory):
    import torch

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        scorer = _fit(checkpoint_every=3, checkpoint_dir=str(Path(directory) / "checkpoints"))
        parameters = [p.detach().clone() for p in scorer.model_.parameters()]
        torch.save({"losses": [h["loss"] for h in scorer.history_], "parameters": parameters},
                   Path(directory) / f"rank{rank}.pt")
    finally:
        torch.distributed.destroy_process_group()


def test_pretraining_on_two_ranks_equals_one_process_on_the_same_global_batch(tmp_path):
    import torch

    run_two_ranks(_training_rank, (free_port(), str(tmp_path)), timeout=180)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    single = _fit()
    want = [h["loss"] for h in single.history_]
    for rank in ranks:
        np.testing.assert_allclose(rank["losses"], want, rtol=1e-5)
        for got, expected in zip(rank["parameters"], single.model_.parameters(), strict=True):
            torch.testing.assert_close(got, expected.detach(), rtol=1e-4, atol=1e-5)
    # the ranks hold the same model (DDP), and rank 0 wrote one loadable checkpoint
    for a, b in zip(ranks[0]["parameters"], ranks[1]["parameters"], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert (tmp_path / "checkpoints" / "step-00000003" / "model" / "config.json").exists()
