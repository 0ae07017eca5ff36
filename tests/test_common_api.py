"""Arguments every transformers encoder takes: output_attentions=False is accepted and changes nothing; True is a
clear error (ELMo has no attention), for the base model and the heads."""

import pytest
import torch

from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification


def test_output_attentions(tiny, tiny_heads_dir):
    model, tokenizer = tiny
    batch = tokenizer(["The cat sat .", "ELMo"], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(model(**batch, output_attentions=False).last_hidden_state, model(**batch).last_hidden_state)
        with pytest.raises(ValueError, match="no attention"):
            model(**batch, output_attentions=True)
        for head_class, name in ((ElmoForTokenClassification, "token"), (ElmoForSequenceClassification, "sequence")):
            head = head_class.from_pretrained(tiny_heads_dir / name).eval()
            assert torch.equal(head(**batch, output_attentions=False).logits, head(**batch).logits)
            with pytest.raises(ValueError, match="no attention"):
                head(**batch, output_attentions=True)
