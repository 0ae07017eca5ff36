"""The one tolerance rule for comparing our float32 outputs with a reference (AllenNLP's own outputs, the NumPy
reference biLM, another code path of ours such as batch vs alone or token cache vs char CNN).

Element-wise: |actual - reference| <= ATOL + RTOL * |reference| (3e-5 + 1e-4 * |reference|).

Why these numbers: both sides are float32 (unit roundoff u = 2**-24 = 6e-8) and each output value comes out of a
chain of GEMMs, convolutions and LSTM steps whose K-term sums (K up to a few thousand) are added in an order that
depends on the CPU's kernels (AVX2, AVX-512, AMX, or none) and on the batch shape. Reordering a K-term sum moves it
by up to about K * u * sum|terms|, and the LSTM recurrence carries such differences forward through every step, so
they grow with the length of a sentence. On the AllenNLP fixtures (values up to 5) the kernel sets of our machines
(AVX-512, AVX2, none) differ from AllenNLP by up to 1.2e-5; on a 120-word line (120 LSTM steps) float32 differs from
the same model in float64 by up to 2.9e-5 at values near 0.2 (an AMD Zen 3, every kernel set: AVX2 and none alike),
60% of this bound, while any real error (a wrong weight, gate order, mask or boundary) moves outputs by 1e-2 or
more. Another runtime's float32 (onnxruntime) is compared with the PyTorch model
in float64: over long inputs two float32 computations differ by both their roundings. Not for bf16/int8 paths
(cosine rules there).
"""

import numpy as np
import torch

RTOL = 1e-4
ATOL = 3e-5


def assert_close_to_reference(actual, reference, what=""):
    """Assert the tolerance rule; accepts tensors, NumPy arrays and numbers (compared as float32 on the CPU)."""
    actual, reference = (
        torch.as_tensor(np.asarray(x.detach().cpu() if torch.is_tensor(x) else x), dtype=torch.float32)
        for x in (actual, reference)
    )
    torch.testing.assert_close(actual, reference, rtol=RTOL, atol=ATOL, msg=lambda m: f"{what}: {m}" if what else m)
