"""The README's main job and the paper examples keep working (small sizes here)."""

import importlib.util
import re
import warnings
from pathlib import Path

import pytest
from sklearn.exceptions import ConvergenceWarning

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_prints_estimates_and_saves_curve(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    output = tmp_path / "curve.png"
    _load("plot_mpt_demo").main(["--output", str(output), "--score-masks", "10", "--n-components", "3"])
    printed = capsys.readouterr().out
    for line in ("MPT estimate of the LML", "exact LML of the fitted model", "PCA.score"):
        assert line in printed
    assert output.stat().st_size > 10_000


@pytest.mark.parametrize(
    "name, argv, expected",
    [
        ("plot_convergence_in_masks", ["--n-samples", "10", "--repeats", "2", "--bias-masks", "200"], "bias of"),
        ("plot_training_curves", ["--n-inits", "1", "--max-epochs", "3"], "exact bias of the fixed-rate objective"),
        ("plot_mpt_curve_area", ["--n-samples", "120", "--max-epochs", "20"], "area under the curve"),
        (
            "mlm_pretraining_curve",
            ["--n-train", "500", "--max-steps", "3", "--n-eval", "5", "--score-masks", "1", "--hidden-size", "32",
             "--vocab-size", "300"],
            "paper area",
        ),
    ],
)
def test_paper_examples_run_small(name, argv, expected, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    output = tmp_path / f"{name}.png"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _load(name).main([*argv, "--output", str(output)])
    assert expected in capsys.readouterr().out
    assert output.stat().st_size > 10_000


def test_grid_search_example_runs_small(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    output = tmp_path / "grid_search.png"
    _load("plot_grid_search").main(
        ["--n-samples", "40", "--components", "2", "--mask-rates", "uniform", "0.5", "--n-digits", "40",
         "--vae-components", "1", "--vae-mask-rates", "0.5", "--n-quadrature", "8", "--cv", "2",
         "--max-epochs", "1", "--curve-masks", "1", "--output", str(output)]
    )
    printed = capsys.readouterr().out
    assert "GridSearchCV(PCA) chose {'pca__n_components': " in printed
    assert "GridSearchCV(MaskedPPCA) chose {'ppca__mask_rate': " in printed
    assert "GridSearchCV(MaskedLinearVAE) chose {'vae__mask_rate': " in printed
    # Counted, not hidden (a PPCA whose moments solver starts at complete data's optimum converges at once).
    assert re.search(r"[1-5] of 5 fits stopped at max_epochs", printed) and "3 of 3 fits stopped" in printed
    assert printed.count("area under its MPT curve") == 2
    assert output.stat().st_size > 10_000


def test_linear_vae_example_runs_small(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from support.datasets import write_mnist

    write_mnist(tmp_path / "fashion", n=30)
    output = tmp_path / "fig3.png"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _load("plot_linear_vae_training").main(
            ["--max-epochs", "2", "--data-home", str(tmp_path / "fashion"), "--output", str(output)]
        )
    printed = capsys.readouterr().out
    assert "Fashion-MNIST (binarised, 30 x 784)" in printed and "ELBO" in printed
    assert output.stat().st_size > 10_000


def test_vae_example_runs_small(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from support.datasets import write_mnist

    write_mnist(tmp_path / "fashion", n=20)
    output = tmp_path / "fig3_vae.png"
    _load("plot_vae_training").main(
        ["--max-epochs", "1", "--n-lml-samples", "5", "--final-lml-samples", "5",
         "--data-home", str(tmp_path / "fashion"), "--output", str(output)]
    )
    printed = capsys.readouterr().out
    assert "Fashion-MNIST (20 x 784)" in printed and "pseudo-Gibbs" in printed
    assert output.stat().st_size > 10_000


def test_mlm_example_prints_table_2_rows_for_a_checkpoint(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")  # load_glue reads the GLUE files with it
    from support.datasets import write_glue
    from transformers import BertConfig, BertForMaskedLM

    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:300], vocab_size=300)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=16, max_position_embeddings=64)
    BertForMaskedLM(config).save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    write_glue(tmp_path / "glue")
    _load("mlm_pretraining_curve").main(
        ["--model", str(tmp_path / "bert"), "--glue-dir", str(tmp_path / "glue"), "--score-masks", "1"]
    )
    printed = capsys.readouterr().out
    for row in ("ax random init.", "cola pre-trained", "qnli random init.", "mrpc pre-trained"):
        assert row in printed
