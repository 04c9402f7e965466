"""Variance per forward pass of the estimators of ``log p(continuation | context)`` and of ``sum_M S(x; M)``.

Each estimator gets the same budget of forward passes (masked copies) per text; its estimate is
repeated with ``--runs`` seeds and the spread across runs is its variance at that budget. The
table gives each estimator's variance and LLaDA's (``stratified``) over it: how many times fewer
passes it needs for LLaDA's certainty. Three models:

- ``joint``: a masked LM whose conditionals come from an explicit joint over 8 binary words
  (:class:`skmpt.testing.TabularJoint`): the answer ``log p(y | c)`` is known;
- ``antiberty``: AntiBERTy (installed offline), a VH chain's last 12 residues given the rest
  (conditional) and a 30-residue CDR-bearing stretch alone (unconditional);
- ``diffusion``: the tiny masked diffusion LM that ``examples/plot_masked_diffusion.py`` trains
  (``mask_rate="uniform"``), at its small size; held-out sentences, last 6 tokens given the rest
  and whole sentences.

Run ``python benchmarks/text_estimator_variance.py`` (a few minutes on a CPU; ``--quick`` for
fewer runs). The machine's load does not change the variances, only the time.
"""

import argparse
import time
import types

import numpy as np
import torch

from skmpt.testing import TabularJoint
from skmpt.text.harness import MaskedLMHarness

ESTIMATORS = ("stratified", "uniform", "low_discrepancy", "time", "sweep", "chain", "controlled")
VH = "EVQLVESGGGLVQPGGSLRLSCAASGFTFSSYAMSWVRQAPGKGLEWVSAISGSGGSTYYADSVKGRFTISRDNSKNTLYLQMNSLRAEDTAVYYCAK"


class JointLM(torch.nn.Module):
    """A masked LM over the words ``a`` and ``b`` whose logits are an explicit joint's conditionals."""

    def __init__(self, joint, tokenizer):
        super().__init__()
        self.joint, self.tokenizer = joint, tokenizer
        self.a, self.b = tokenizer.convert_tokens_to_ids(["a", "b"])

    def forward(self, input_ids, attention_mask):
        words = input_ids[:, 1:-1]
        masks = (words == self.tokenizer.mask_token_id).unsqueeze(1)
        logits = torch.full((*input_ids.shape, len(self.tokenizer)), -torch.inf, dtype=torch.float64)
        for value, token in ((0.0, self.a), (1.0, self.b)):
            X = torch.where(words == self.b, 1.0, 0.0).double()
            X[masks[:, 0]] = value
            logits[:, 1:-1, token] = self.joint.masked_log_prob(X, masks)[:, 0]
        return types.SimpleNamespace(logits=logits)


def binary_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def spread(lm, run, estimator, runs):
    """Mean, variance and forward passes of ``run(lm)`` over ``runs`` seeds, with ``estimator``."""
    lm.estimator = estimator
    values = []
    for seed in range(runs):
        lm.seed = seed
        values.append(run(lm))
    estimates = np.array([value for value, _ in values])
    return estimates.mean(), estimates.var(ddof=1), values[0][1]


def table(name, lm, run, runs, answer=None):
    """Print each estimator's mean, variance, passes, and LLaDA's variance per pass over its own."""
    rows = {estimator: spread(lm, run, estimator, runs) for estimator in ESTIMATORS}
    reference = rows["stratified"][1] * rows["stratified"][2]
    print(f"\n{name} (budget {lm.max_forward_passes} forward passes, {runs} runs)"
          + ("" if answer is None else f"; exact answer {answer:.4f}"))
    print(f"{'estimator':<16} {'mean':>10} {'variance':>10} {'passes':>7} {'LLaDA/it per pass':>18}")
    for estimator, (mean, variance, passes) in rows.items():
        ratio = reference / max(variance * passes, 1e-300)
        print(f"{estimator:<16} {mean:10.4f} {variance:10.4g} {passes:7d} {ratio:18.2f}")


def conditional(context, continuation):
    def run(lm):
        result = lm.loglikelihood([types.SimpleNamespace(args=(context, continuation), task_name="b", doc_id=None)])
        return result[0][0], result[0].forward_passes

    return run


def unconditional(text):
    def run(lm):
        result = lm.loglikelihood_rolling([types.SimpleNamespace(args=(text,))])[0]
        return float(result), result.forward_passes

    return run


def joint_model(args):
    tokenizer = binary_tokenizer()
    joint = TabularJoint.random(8, concentration=0.3, random_state=0)
    lm = MaskedLMHarness(pretrained=JointLM(joint, tokenizer), tokenizer=tokenizer, max_length=10,
                         max_forward_passes=args.passes, adaptive=False, check_greedy=False)
    words = "a b b a b a a b".split()
    x = torch.tensor([[float(w == "b") for w in words]], dtype=torch.float64)
    observed = torch.tensor([True, True] + [False] * 6)
    answer = float(joint.log_marginal(x) - joint.log_marginal(x, observed=observed))
    table("explicit joint: 6 words given 2", lm, conditional("a b", " " + " ".join(words[2:])), args.runs, answer)
    table("explicit joint: 8 words", lm, unconditional(" ".join(words)), args.runs, float(joint.log_marginal(x)))


def antiberty(args):
    lm = MaskedLMHarness(pretrained="antiberty", max_forward_passes=args.passes, adaptive=False, check_greedy=False)
    table("AntiBERTy: a VH chain's last 12 residues given the rest", lm, conditional(VH[:-12], VH[-12:]), args.runs)
    table("AntiBERTy: 30 residues (CDR-H2 to FR3) alone", lm, unconditional(VH[40:70]), args.runs)


def diffusion(args):
    from sklearn.model_selection import train_test_split
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    train, test = train_test_split(load_wordnet_sentences(), test_size=40, random_state=0)
    train = train[:3000]
    tokenizer = make_wordpiece_tokenizer(train, vocab_size=250)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    scorer = MLMCurveScorer(config, tokenizer=tokenizer, device="cpu", random_state=0, max_length=128,
                            mask_rate="uniform", max_steps=args.steps, batch_size=32, learning_rate=3e-3).fit(train)
    lm = MaskedLMHarness(pretrained=scorer.runner_.predictor, tokenizer=tokenizer, max_forward_passes=args.passes,
                         adaptive=False, check_greedy=False)
    sentence = max(test[:10], key=len)
    words = sentence.split()
    table(f"diffusion LM ({args.steps} steps): {sentence!r}, its last 3 words given the rest", lm,
          conditional(" ".join(words[:-3]), " " + " ".join(words[-3:])), args.runs)
    table("diffusion LM: the same sentence alone", lm, unconditional(sentence), args.runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=32, help="forward passes per estimate")
    parser.add_argument("--runs", type=int, default=24, help="repeats (seeds) per estimator")
    parser.add_argument("--steps", type=int, default=300, help="training steps of the diffusion LM")
    parser.add_argument("--models", default="joint,antiberty,diffusion")
    parser.add_argument("--quick", action="store_true", help="8 runs, 100 training steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps = 8, 100
    torch.set_num_threads(1)
    start = time.process_time()
    for name in args.models.split(","):
        {"joint": joint_model, "antiberty": antiberty, "diffusion": diffusion}[name](args)
    print(f"\nCPU time {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
