"""skmpt.datasets.text: the bundled WordNet sentences, GLUE files the tests write themselves, the WordPiece
tokenizer."""

import json
import os
import subprocess
import sys
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skmpt import datasets
from support.datasets import write_glue


@pytest.mark.installed  # the package data of the installed wheel, in CI
def test_wordnet_sentences_and_notice():
    from importlib import resources

    sentences = datasets.load_wordnet_sentences()
    assert len(sentences) == len(set(sentences)) == 48224
    assert all(s and s == " ".join(s.split()) for s in sentences)
    notice = (resources.files("skmpt") / "data" / "WORDNET_NOTICE.txt").read_text(encoding="utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in notice


def test_load_glue_reads_the_official_layout(tmp_path):
    pytest.importorskip("datasets")
    write_glue(tmp_path / "glue")
    kwargs = dict(data_dir=tmp_path / "glue", cache_dir=tmp_path / "cache")
    cola = datasets.load_glue("cola", "train", **kwargs)
    assert cola.column_names == ["sentence", "label", "idx"]
    assert cola["label"] == [1, 0] and cola[0]["sentence"] == "Our friends won't buy this analysis."
    assert datasets.load_glue("cola", **kwargs)[0]["sentence"].endswith('"rocks".')  # quotes kept as written
    assert datasets.load_glue("cola", "test", **kwargs)[0] == {
        "sentence": "Bill whistled past the house.", "label": -1, "idx": 0
    }
    mrpc = datasets.load_glue("mrpc", **kwargs)
    assert mrpc[0] == {"sentence1": 'He said "yes".', "sentence2": "He agreed.", "label": 1, "idx": 0}
    assert datasets.load_glue("qnli", **kwargs)["label"] == [0, 1]
    ax = datasets.load_glue("ax", "test", **kwargs)
    assert ax.column_names == ["premise", "hypothesis", "label", "idx"] and ax[0]["label"] == -1


def test_load_glue_errors(tmp_path):
    pytest.importorskip("datasets")
    write_glue(tmp_path)
    with pytest.raises(FileNotFoundError, match="RTE"):
        datasets.load_glue("rte", data_dir=tmp_path)
    with pytest.raises(ValueError, match="only a test split"):
        datasets.load_glue("ax", "validation", data_dir=tmp_path)
    with pytest.raises(ValueError, match="task"):
        datasets.load_glue("mnli", data_dir=tmp_path)


@pytest.mark.parametrize(
    "task, name, text, line, message",
    [
        ("cola", "CoLA/dev.tsv", "gj04\t1\t\tFine.\ngj04\t1\tOnly three fields\n", 2, "3 tab-separated fields where 4"),
        ("cola", "CoLA/dev.tsv", "gj04\t1\t\tFine.\ngj04\t0\t*\tok\textra\n", 2, "5 tab-separated fields where 4"),
        ("cola", "CoLA/dev.tsv", "gj04\t1\t\tFine.\n\ngj04\t0\t*\tAfter a gap.\n", 2, "empty line"),
        ("cola", "CoLA/dev.tsv", "gj04\tyes\t\tFine.\n", 1, "the label field is 'yes', not an integer"),
        ("qnli", "QNLI/dev.tsv", "index\tquestion\tsentence\n0\tWhat?\tThat.\n", 1, "3 tab-separated fields where 4"),
        ("qnli", "QNLI/dev.tsv", "index\tquestion\tsentence\tlabel\nx\tWhat?\tThat.\tentailment\n", 2, "idx field"),
        ("qnli", "QNLI/dev.tsv", "index\tquestion\tsentence\tlabel\n0\tWhat?\tThat.\tmaybe\n", 2, "entailment"),
        (
            "cola", "CoLA/test.tsv", "index\tsentence\n0\tFine.\n1\tA\ttab too many\n", 3,
            "3 tab-separated fields where 2",
        ),
    ],
)
def test_load_glue_names_the_file_and_line_of_a_malformed_row(tmp_path, task, name, text, line, message):
    pytest.importorskip("datasets")
    path = tmp_path / name
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    split = "test" if name.endswith("test.tsv") else "validation"
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}, line {line}: .*{re.escape(message)}"):
        datasets.load_glue(task, split, data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # rejected before datasets reads anything


def test_load_glue_names_a_file_that_is_not_utf8(tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / "CoLA").mkdir()
    (tmp_path / "CoLA" / "dev.tsv").write_bytes(b"gj04\t1\t\tCaf\xe9.\n")
    with pytest.raises(ValueError, match=r"dev\.tsv is not UTF-8"):
        datasets.load_glue("cola", data_dir=tmp_path)


def test_wordpiece_tokenizer_is_the_same_in_every_call_and_process():
    texts = datasets.load_wordnet_sentences()[:300]
    vocabularies = [datasets.make_wordpiece_tokenizer(texts, vocab_size=300).get_vocab() for _ in range(4)]
    assert all(vocabulary == vocabularies[0] for vocabulary in vocabularies)
    script = ("import json; from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer; "
              "print(json.dumps(make_wordpiece_tokenizer(load_wordnet_sentences()[:300], vocab_size=300).get_vocab()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join(sys.path)}
    output = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(output.stdout.strip().splitlines()[-1]) == vocabularies[0]
    tokenizer = datasets.make_wordpiece_tokenizer(texts, vocab_size=300)
    pieces = tokenizer.tokenize(texts[0])
    assert "[UNK]" not in pieces and tokenizer.convert_tokens_to_string(pieces) == tokenizer.decode(
        tokenizer(texts[0], add_special_tokens=False)["input_ids"])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="abcdeé é-.,", min_size=1, max_size=30), min_size=1, max_size=8),
       st.integers(10, 80))
def test_wordpiece_tokenizer_depends_on_its_arguments_only(texts, vocab_size):
    first = datasets.make_wordpiece_tokenizer(texts, vocab_size=vocab_size)
    second = datasets.make_wordpiece_tokenizer(texts, vocab_size=vocab_size)
    assert first.get_vocab() == second.get_vocab()
    for text in texts:  # every character seen in training has its piece: nothing becomes [UNK]
        assert first.unk_token not in first.tokenize(text)


def test_wordpiece_tokenizer_names_too_many_characters(monkeypatch):
    from skmpt.datasets import text as text_data

    monkeypatch.setattr(text_data, "_PRIVATE_USE_SIZE", 3)  # 65534 distinct characters, scaled down
    assert len(datasets.make_wordpiece_tokenizer(["abc"], vocab_size=20)) > 0
    with pytest.raises(ValueError, match="at most 3 distinct characters; got 4"):
        datasets.make_wordpiece_tokenizer(["ab cd"], vocab_size=20)
