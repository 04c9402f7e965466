"""The lm-eval backend under a launcher: lm-eval deals the documents to 2 CPU processes, and they give one's results."""

import json
import os

import numpy as np
import pytest
from support.ranks import free_port, run_two_ranks

pytest.importorskip("transformers")
pytest.importorskip("lm_eval")


def _write_task(directory):
    docs = [{"context": "a b a", "choices": ["b a", "a a b b b"], "label": 0},
            {"context": "b b", "choices": ["a", "b b b"], "label": 1},
            {"context": "a", "choices": ["b b a b a", "a"], "label": 1}]
    data = os.path.join(directory, "mc.jsonl")
    with open(data, "w", encoding="utf-8") as file:
        file.write("\n".join(json.dumps(doc) for doc in docs))
    with open(os.path.join(directory, "toy_mc.yaml"), "w", encoding="utf-8") as file:
        file.write(f"task: toy_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
                   "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{context}}'\n"
                   "doc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\nmetric_list:\n  - metric: acc\n")


def _compute(directory):
    """lm-eval's results on the local task: each document's choices' log-likelihoods (rank 0), or None."""
    import lm_eval
    import lm_eval.tasks
    import torch
    from support.text import binary_tokenizer
    from transformers import BertConfig, BertForMaskedLM

    from skmpt.text.harness import MaskedLMHarness

    tokenizer = binary_tokenizer()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=16, max_position_embeddings=16))
    lm = MaskedLMHarness(pretrained=model.eval(), tokenizer=tokenizer, max_forward_passes=8)
    results = lm_eval.simple_evaluate(model=lm, tasks=["toy_mc"], log_samples=True,
                                      task_manager=lm_eval.tasks.TaskManager(include_path=directory))
    if results is None:
        return None
    samples = sorted(results["samples"]["toy_mc"], key=lambda sample: sample["doc_id"])
    return np.array([[float(resps[0][0]) for resps in sample["resps"]] for sample in samples])


def _rank(rank, port, directory):
    import torch

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), HF_DATASETS_OFFLINE="1")
    torch.set_num_threads(1)
    try:
        values = _compute(directory)
        if values is not None:
            np.save(os.path.join(directory, "rank0.npy"), values)
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_processes_give_one_process_results(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    _write_task(str(tmp_path))
    run_two_ranks(_rank, (free_port(), str(tmp_path)), timeout=240)
    single = _compute(str(tmp_path))
    # float32 models: a request scored in another batch differs by rounding only
    np.testing.assert_allclose(np.load(tmp_path / "rank0.npy"), single, rtol=1e-5)
