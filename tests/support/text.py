"""Small text models and tokenizers shared by the text and CLI tests."""

import types

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def binary_tokenizer():
    """Whitespace tokenizer over the two words ``a`` and ``b`` with BERT's special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {token: i for i, token in enumerate([*SPECIALS, "a", "b"])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )


class JointMaskedLM(torch.nn.Module):
    """A masked LM whose conditionals come from one explicit joint over binary sentences.

    Sentences are ``[CLS] w_1 ... w_D [SEP]`` with ``w`` in {a, b}; at a masked position the
    logits are ``log p(w_j | unmasked words)``, computed by brute force from the joint.
    """

    def __init__(self, joint, tokenizer):
        super().__init__()
        self.joint = joint
        self.a, self.b = tokenizer.convert_tokens_to_ids(["a", "b"])
        self.mask_id, self.vocab_size = tokenizer.mask_token_id, len(tokenizer)

    def forward(self, input_ids, attention_mask):
        device = input_ids.device  # the joint's tables are on the CPU; the logits go back to the inputs' device
        input_ids, attention_mask = input_ids.cpu(), attention_mask.cpu()
        end = int(attention_mask.sum(1).max()) - 1  # the [SEP] of texts of D words; padding after it is ignored
        words = input_ids[:, 1:end]
        masks = (words == self.mask_id).unsqueeze(1)
        logits = torch.full((*input_ids.shape, self.vocab_size), -torch.inf, dtype=torch.float64)
        for value, token in ((0.0, self.a), (1.0, self.b)):
            X = torch.where(words == self.b, 1.0, 0.0).double()
            X[masks[:, 0]] = value
            logits[:, 1:end, token] = self.joint.masked_log_prob(X, masks)[:, 0]
        return types.SimpleNamespace(logits=logits.to(device))


TEXTS = ["a b a b", "", "b b a", "  ", "a"]  # lines 1..5; lines 2 and 4 are blank


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny BERT over the words a and b, saved with its tokenizer."""
    tokenizer = binary_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("cli") / "model"
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
