"""What `layer_hidden_states` reads of a model once and keeps: its forward's parameters and
whether it is a causal decoder (a signature and a walk of every submodule per batch cost as much
as a small model's forward on a GPU)."""

from __future__ import annotations

import gc
import types

import torch
from transformers import BertConfig, BertModel

from relrep_hf.encoding.models import _FORWARD_FACTS, hidden_states


def test_forward_facts_are_read_once_per_model_again_for_a_new_forward_and_dropped_with_it():
    model = BertModel(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=8)).eval()  # fmt: skip
    inputs = {"input_ids": torch.tensor([[1, 2, 3]]), "attention_mask": torch.ones(1, 3)}
    with torch.inference_mode():
        first = hidden_states(model, inputs)
        assert _FORWARD_FACTS[model][1:] == (_FORWARD_FACTS[model][1], True, False)
        assert "input_ids" in _FORWARD_FACTS[model][1]

        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            return BertModel.forward(self, input_ids=input_ids, attention_mask=attention_mask)

        model.forward = types.MethodType(forward, model)  # a forward replaced is read again
        assert torch.equal(hidden_states(model, inputs), first)
    assert _FORWARD_FACTS[model][0] is forward
    assert _FORWARD_FACTS[model][1] == {"input_ids", "attention_mask"}
    count = len(_FORWARD_FACTS)
    del model, forward
    gc.collect()
    assert len(_FORWARD_FACTS) == count - 1
