"""The devices `load_model` takes (model_source.torch_device): a device this torch cannot use, or one that holds no
data, is one line naming it once (never "--device --device cuda"), from Python and from a command, and the meta
device is refused, not a traceback."""

import pytest
import torch
from conftest import one_line, run

from elmo_transformers.errors import UserError
from elmo_transformers.model_source import load_model


@pytest.mark.parametrize(
    "device, reason",
    [
        ("meta", "the meta device holds no data, so no model runs there"),
        (torch.device("meta"), "the meta device holds no data, so no model runs there"),
        (
            "xla",
            "Could not run 'aten::empty.memory_format' with arguments from the 'XLA' backend",
        ),  # a backend not built
    ],
)
def test_a_device_without_data_or_backend_is_one_line(tiny_model_dir, device, reason):
    with pytest.raises(UserError) as raised:
        load_model(tiny_model_dir, device=device)
    assert str(raised.value) == f"device {device}: not usable here as a torch device ({reason}); devices available: cpu"


def test_the_command_names_the_device_flag_once(text, tiny_model_dir, tmp_path, capsys):
    embed = ["embed", text, tmp_path / "out.hdf5", "--top", "--model", tiny_model_dir]
    assert one_line(*run([*embed, "--device", "meta"], capsys)) == (
        "error: --device meta: not usable here as a torch device (the meta device holds no data, so no model runs "
        "there); devices available: cpu"
    )
    if not torch.backends.cuda.is_built():  # a CPU-only torch, as on the test machines
        assert one_line(*run([*embed, "--device", "cuda"], capsys)) == (
            "error: --device cuda: not usable here as a torch device (Torch not compiled with CUDA enabled); devices "
            "available: cpu"
        )
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "out.hdf5.partial").exists()
