"""int8 inference the transformers way: `from_pretrained(..., quantization_config=ElmoInt8Config())`.

transformers 5 lets a model outside the library add a quantization method (`register_quantization_config`,
`register_quantizer`). Importing this module (modeling_elmo.py does, installed or as remote code) registers
`quant_method="elmo_int8"`, so that `quantization_config=ElmoInt8Config()` or `quantization_config={"quant_method":
"elmo_int8"}` works with `ElmoModel.from_pretrained` and with the Auto classes under `trust_remote_code=True`.

After the float32 weights are loaded, the biLM's LSTM GEMM weights (input, state, projection; most of its
arithmetic) are replaced by int8 weights with one scale per output row, run through torch's dynamic quantized linear
(fbgemm on x86, qnnpack on ARM; the activations are quantized per call). The float LSTM weights are dropped, so such
a model cannot be saved (save_pretrained refuses; save the float model and quantize again when loading) nor trained
nor cast to another dtype. The char CNN, the cell state and the scalar mixes stay float32.

torch's own `torch.ao.quantization.quantize_dynamic(model)` does nothing useful here: it swaps `nn.Linear`/`nn.LSTM`
modules, and the biLM's LSTM weights are 3-D parameters used through batched matmuls.
"""

import torch
from transformers.quantizers import HfQuantizer, register_quantization_config, register_quantizer
from transformers.quantizers.auto import AUTO_QUANTIZATION_CONFIG_MAPPING, AUTO_QUANTIZER_MAPPING
from transformers.utils import logging
from transformers.utils.quantization_config import QuantizationConfigMixin

try:  # loaded as remote code, the modules are one package
    from .kernels_elmo import INT8_KERNELS, int8_engine_error
except ImportError:  # installed with pip, they are top-level modules
    from kernels_elmo import INT8_KERNELS, int8_engine_error

logger = logging.get_logger(__name__)

QUANT_METHOD = "elmo_int8"


class ElmoInt8Config(QuantizationConfigMixin):
    """int8 weights for the biLM's LSTM GEMMs (see the module docstring).

    Args:
        kernel (`str`, defaults to `"auto"`): a performance setting: which int8 GEMMs run. `"quantized"`: torch's
            dynamic quantized linear (fbgemm on x86, qnnpack on ARM); `"onednn"`: oneDNN's int8 linear (AMX's int8
            tiles where the CPU has them); `"auto"`: the rule of `kernels_elmo.best_int8_kernel` (oneDNN where the
            CPU has AMX int8, torch's quantized linear elsewhere).
    """

    def __init__(self, kernel="auto", **kwargs):
        if kernel not in INT8_KERNELS:
            raise ValueError(f"ElmoInt8Config: kernel must be one of {INT8_KERNELS}, got {kernel!r}")
        self.quant_method = QUANT_METHOD
        self.kernel = kernel


class ElmoInt8Quantizer(HfQuantizer):
    """Quantizes after loading (no calibration, no pre-quantized files): the model's `quantize_lstm_int8` does it,
    so a quantizer registered by another copy of these modules (installed and remote code) still runs each model's
    own code."""

    requires_calibration = False

    def validate_environment(self, *args, device_map=None, **kwargs):
        problem = int8_engine_error()
        devices = set(device_map.values()) if isinstance(device_map, dict) else {device_map}
        if problem is None and not devices <= {None, "cpu", torch.device("cpu")}:
            problem = f"int8 inference runs on the CPU, got device_map={device_map!r}"
        if problem is not None:
            raise RuntimeError(f"ElmoInt8Config: {problem}")

    def update_dtype(self, dtype):
        if dtype is not None and dtype != torch.float32:
            raise ValueError(
                f"ElmoInt8Config quantizes float32 weights and runs float32 activations, got dtype={dtype}: load with "
                "dtype=torch.float32 (int8 and bf16 are two alternative ways to run the model faster)"
            )
        return torch.float32

    def _process_model_after_weight_loading(self, model, **kwargs):
        model.quantize_lstm_int8(self.quantization_config.kernel)
        return model

    def is_serializable(self, **kwargs):
        logger.warning(
            "An int8-quantized ELMo model holds no float LSTM weights, so it cannot be saved: save the float model "
            "(from_pretrained without quantization_config) and pass quantization_config=ElmoInt8Config() when "
            "loading it"
        )
        return False

    @property
    def is_trainable(self):
        return False


# Registered once per process: the installed module and a remote-code copy may both be imported.
if QUANT_METHOD not in AUTO_QUANTIZATION_CONFIG_MAPPING:
    register_quantization_config(QUANT_METHOD)(ElmoInt8Config)
if QUANT_METHOD not in AUTO_QUANTIZER_MAPPING:
    register_quantizer(QUANT_METHOD)(ElmoInt8Quantizer)
