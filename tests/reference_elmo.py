"""An independent, deliberately plain NumPy (float64) implementation of the original ELMo forward pass.

It reads the original HDF5 arrays in their TensorFlow layout and follows the original format's description (the
project's shared original-format.md) step by step, one sentence at a time, so it shares no code with bilm_elmo.py.
It is checked against the AllenNLP fixtures and then serves as the reference for configurations AllenNLP cannot run
(no skip connections, one layer, tanh char CNN).
"""

import numpy as np


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _clip(x, bound):
    return x if bound is None else np.clip(x, -bound, bound)


def _lstm_name(direction, layer):
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def reference_sentence(arrays, options, char_ids, keep_boundaries=False):
    """char_ids: [n, 50] shifted ids of one sentence, BOS/EOS not included. Returns [L + 1, n, 2P] ([L + 1, n + 2, 2P]
    with the BOS and EOS positions if `keep_boundaries`)."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    max_chars = cnn["max_characters_per_token"]
    bos = [259, 257, 260] + [261] * (max_chars - 3)
    eos = [259, 258, 260] + [261] * (max_chars - 3)
    ids = np.array([bos] + [list(c) for c in char_ids] + [eos])
    table = np.vstack([np.zeros((1, arrays["char_embed"].shape[1])), arrays["char_embed"]]).astype(np.float64)
    chars = table[ids]  # [n + 2, 50, d]
    act = np.tanh if cnn["activation"] == "tanh" else (lambda v: np.maximum(v, 0))
    features = []
    for i, (width, _) in enumerate(cnn["filters"]):
        kernel = arrays[f"CNN/W_cnn_{i}"][0].astype(np.float64)  # [width, d, n]
        windows = np.stack([chars[:, k : k + max_chars - width + 1] for k in range(width)], axis=2)
        conv = np.einsum("tpkd,kdn->tpn", windows, kernel) + arrays[f"CNN/b_cnn_{i}"]
        features.append(act(conv.max(axis=1)))
    x = np.concatenate(features, axis=-1)
    for k in range(cnn["n_highway"]):
        carry = _sigmoid(x @ arrays[f"CNN_high_{k}/W_carry"] + arrays[f"CNN_high_{k}/b_carry"])
        transform = np.maximum(x @ arrays[f"CNN_high_{k}/W_transform"] + arrays[f"CNN_high_{k}/b_transform"], 0)
        x = carry * transform + (1 - carry) * x
    token = x @ arrays["CNN_proj/W_proj"] + arrays["CNN_proj/b_proj"]

    per_direction = []
    for direction in range(2):
        sequence = token if direction == 0 else token[::-1]
        outputs = []
        for layer in range(lstm["n_layers"]):
            name = _lstm_name(direction, layer)
            kernel, bias, proj = arrays[f"{name}/W_0"], arrays[f"{name}/B"], arrays[f"{name}/W_P_0"]
            hidden = proj.shape[0]
            h, c = np.zeros(proj.shape[1]), np.zeros(hidden)
            steps = []
            for x_t in sequence:
                z = np.concatenate([x_t, h]) @ kernel + bias
                i, j, f, o = (z[g * hidden : (g + 1) * hidden] for g in range(4))
                c = _clip(_sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j), lstm["cell_clip"])
                h = _clip((_sigmoid(o) * np.tanh(c)) @ proj, lstm["proj_clip"])
                steps.append(h)
            out = np.array(steps)
            if layer > 0 and lstm.get("use_skip_connections", True):
                out = out + sequence
            sequence = out
            outputs.append(out if direction == 0 else out[::-1])
        per_direction.append(outputs)
    layers = [np.concatenate([token, token], axis=-1)]
    layers += [np.concatenate([f, b], axis=-1) for f, b in zip(*per_direction)]
    return np.stack(layers) if keep_boundaries else np.stack(layers)[:, 1:-1]


def load_hdf5(path):
    """All datasets of an original weight file, single-layer flat names mapped to the nested layout."""
    import h5py

    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                arrays.__setitem__(name, obj[...].astype(np.float64)) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return {k.replace("/RNN/LSTMCell/", "/RNN/MultiRNNCell/Cell0/LSTMCell/"): v for k, v in arrays.items()}
