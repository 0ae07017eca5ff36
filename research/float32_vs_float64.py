"""How far float32 ELMo outputs are from exact arithmetic, by sentence length: this port (one batch, and each
sentence alone) and AllenNLP 2.10.1's `_ElmoBiLm`, against the float64 NumPy reference (tests/reference_elmo.py), on
the Original size (2 x 4096 LSTM, projection 512) with random weights in the original file format.

    python research/float32_vs_float64.py [--allennlp-python /work/allennlp-venv/bin/python] [--lengths 5 20 62 120]

Prints, per sentence length and biLM layer, the largest absolute difference from the float64 reference, between the
port and AllenNLP, between the port's batch and alone results, and of the port run in float64 (with the weights
converted in float64) from the reference: only float64 rounding remains there.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from configuration_elmo import ElmoConfig  # noqa: E402
from elmo_transformers.conversion.allennlp import (  # noqa: E402
    convert,
    options_from_config,
    to_state_dict,  # noqa: E402
    write_random_weights,
)
from reference_elmo import load_hdf5, reference_sentence  # noqa: E402

ALLENNLP = """
import json, sys, warnings
import numpy as np, torch
warnings.filterwarnings("ignore")
from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids
from allennlp.nn.util import remove_sentence_boundaries
options, weights, sentences, out = sys.argv[1:5]
sentences = json.load(open(sentences))
bilm = _ElmoBiLm(options, weights).eval()
with torch.no_grad():
    result = bilm(batch_to_ids(sentences))
layers = [remove_sentence_boundaries(a, result["mask"])[0].numpy() for a in result["activations"]]
np.save(out, np.stack(layers))
"""


def sentences_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    return [["".join(rng.choice(letters, rng.integers(1, 10))) for _ in range(n)] for n in lengths]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allennlp-python", help="an interpreter that imports AllenNLP 2.10.1")
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 20, 62, 120])
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="random weights: Glorot-sized values times this (3: cell and projection clipping happen)",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    config = ElmoConfig()
    folder = tempfile.mkdtemp(prefix="elmo-f32-")
    options, weights = os.path.join(folder, "options.json"), os.path.join(folder, "weights.hdf5")
    with open(options, "w") as f:
        json.dump(options_from_config(config), f)
    write_random_weights(config, weights, scale=args.scale)
    sentences = sentences_of(args.lengths)
    model, tokenizer = convert(options, weights)
    arrays, options_dict = load_hdf5(weights), options_from_config(config)
    # The float64 port gets the file's values converted in float64 (the converter's float32 state dict rounds the
    # forget bias + 1 to float32, which alone moves the float64 outputs by about 1e-9).
    exact = to_state_dict(config, arrays)

    reference = [
        reference_sentence(arrays, options_dict, np.array(tokenizer([s], is_split_into_words=True)["input_ids"][0]))
        for s in sentences
    ]
    with torch.no_grad():
        batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        batched = model(**batch, output_hidden_states=True).hidden_states
        alone = [
            model(
                **tokenizer([s], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True
            ).hidden_states
            for s in sentences
        ]
        double = model.double()
        double.load_state_dict(exact, strict=False)
        in_float64 = [
            double(
                **tokenizer([s], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True
            ).hidden_states
            for s in sentences
        ]
    allennlp = None
    if args.allennlp_python:
        with open(os.path.join(folder, "sentences.json"), "w") as f:
            json.dump(sentences, f)
        out = os.path.join(folder, "allennlp.npy")
        subprocess.run([args.allennlp_python, "-c", ALLENNLP, options, weights, f.name, out], check=True)
        allennlp = np.load(out)

    print(
        f"Original size (2 x 4096 LSTM, projection 512), random weights (scale {args.scale}); "
        "max |x - float64 reference| per layer"
    )
    print(
        f"{'words':>5} {'layer':>5} {'port batch':>11} {'port alone':>11} {'AllenNLP':>11} {'port-AllenNLP':>14} "
        f"{'batch-alone':>12} {'port f64':>10}"
    )
    for i, (words, ref) in enumerate(zip(sentences, reference)):
        n = len(words)
        for layer in range(config.n_layers + 1):
            row = [
                np.abs(batched[layer][i, :n].numpy() - ref[layer]).max(),
                np.abs(alone[i][layer][0].numpy() - ref[layer]).max(),
            ]
            if allennlp is not None:
                row += [
                    np.abs(allennlp[layer][i, :n] - ref[layer]).max(),
                    np.abs(batched[layer][i, :n].numpy() - allennlp[layer][i, :n]).max(),
                ]
            else:
                row += [float("nan")] * 2
            row.append(np.abs(batched[layer][i, :n].numpy() - alone[i][layer][0].numpy()).max())
            row.append(np.abs(in_float64[i][layer][0].numpy() - ref[layer]).max())
            print(f"{n:>5} {layer:>5} " + " ".join(f"{v:>{w}.1e}" for v, w in zip(row, (11, 11, 11, 14, 12, 10))))


if __name__ == "__main__":
    main()
