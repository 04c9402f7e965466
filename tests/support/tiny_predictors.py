"""Tiny masked predictors of the kinds masked diffusion LMs come in, for the tests of skmpt.text.

- :func:`gpt2_style_tokenizer`: a word-level tokenizer with GPT-2's one special token
  ``<|endoftext|>`` and neither a mask nor a padding token (MDLM's masks are the id one past it).
- :class:`TinyBidirectionalLM`: a two-layer bidirectional transformer returning logits, optionally
  conditioned on a timestep (``timesteps=``) like MDLM's denoiser.
- :class:`ShiftedLM`: the same logits shifted by one position, as Dream's (position ``i``
  holds the prediction of token ``i + 1``).
- :class:`TinyDiffusionConfig` / :class:`TinyDiffusionModel`: a ``transformers`` model that is
  not built into the library, loaded with ``AutoModel`` (also usable as remote code).

This file imports only torch, tokenizers and transformers, so it can be copied into a model
directory as its remote code.
"""

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "a", "big", "red", "saw", "and"]
EOS = "<|endoftext|>"


def gpt2_style_tokenizer(bos=False):
    """Word-level tokenizer over :data:`WORDS` with only ``<|endoftext|>`` (id 0); no mask, no padding token.

    With ``bos=True`` it puts ``<|endoftext|>`` in front of every text (a BOS token, which models
    with shifted logits need to predict the first word).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([EOS, *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=EOS))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(single=f"{EOS} $A", special_tokens=[(EOS, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=EOS, eos_token=EOS, unk_token=EOS)


#: MDLM's convention: the mask id is one past the tokenizer's vocabulary, and the model predicts one more id.
MASK_ID = len(WORDS) + 1
VOCAB_SIZE = len(WORDS) + 2


class TinyBidirectionalLM(torch.nn.Module):
    """Two-layer bidirectional transformer: ``input_ids`` (and ``attention_mask``) to logits.

    With ``timestep=True`` its forward takes ``timesteps`` (shape ``(batch,)``), added to every
    position through a learned embedding, as MDLM's time-conditioned denoiser.
    """

    def __init__(self, vocab_size=VOCAB_SIZE, width=16, max_length=32, timestep=False, seed=0):
        super().__init__()
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.embedding = torch.nn.Embedding(vocab_size, width)
        self.positions = torch.nn.Embedding(max_length, width)
        layer = torch.nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.time = torch.nn.Linear(1, width) if timestep else None
        self.head = torch.nn.Linear(width, vocab_size)
        torch.random.set_rng_state(generator_state)

    def forward(self, input_ids, attention_mask=None, timesteps=None):
        if (self.time is None) != (timesteps is None):
            raise TypeError("timesteps must be given exactly when the model is time-conditioned")
        hidden = self.embedding(input_ids) + self.positions(torch.arange(input_ids.shape[1], device=input_ids.device))
        if self.time is not None:
            hidden = hidden + self.time(timesteps.to(hidden.dtype).reshape(-1, 1)).unsqueeze(1)
        padding = None if attention_mask is None else attention_mask == 0
        return self.head(self.encoder(hidden, src_key_padding_mask=padding))


class ShiftedLM(torch.nn.Module):
    """``model``'s logits moved one position to the left: position ``i`` predicts token ``i + 1`` (Dream)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None):
        logits = self.model(input_ids, attention_mask)
        return {"logits": torch.cat([logits[:, 1:], logits[:, -1:]], dim=1)}


class TinyDiffusionConfig(PretrainedConfig):
    model_type = "tiny-diffusion"

    def __init__(self, vocab_size=VOCAB_SIZE, width=16, **kwargs):
        self.vocab_size, self.width = vocab_size, width
        super().__init__(**kwargs)


class TinyDiffusionModel(PreTrainedModel):
    """A ``transformers`` model that is no masked-LM class: ``AutoModel`` loads it; its output holds logits."""

    config_class = TinyDiffusionConfig
    base_model_prefix = "backbone"

    def __init__(self, config):
        super().__init__(config)
        self.backbone = TinyBidirectionalLM(config.vocab_size, config.width)
        self.post_init()

    def _init_weights(self, module):  # keep the seeded initialisation of the backbone
        pass

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return MaskedLMOutput(logits=self.backbone(input_ids, attention_mask))
