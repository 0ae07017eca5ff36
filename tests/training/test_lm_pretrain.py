"""`elmo-transformers pretrain --model-name-or-path LM` continues a converted language model with its own softmax and
vocabulary (lm_1b's order, <S> on line 1), optionally adding the new text's frequent words; resumable."""

import json
import shutil

import pytest
import torch
from conftest import LM_FIXTURE as LM
from transformers import AutoModelForPreTraining

from elmo_transformers.cli import main as cli_main
from elmo_transformers.cli import pretrain
from elmo_transformers.training.pretraining import add_words_to_softmax
from modeling_elmo import ElmoForLanguageModeling
from tokenization_elmo import ElmoTokenizer

TEXT = [
    "the movie was good , the plot was thin .",
    "a good movie , a bad plot .",
    "the plot of the movie is thin .",
    "sequel sequel plot",
]


def test_new_rows_start_as_unk_with_their_share(lm_dir):
    model = ElmoForLanguageModeling.from_pretrained(lm_dir)
    old_weight, old_bias = model.lm_softmax.weight.clone(), model.lm_softmax.bias.clone()
    add_words_to_softmax(model, 2, [("plot", 6), ("thin", 2)], 10)
    assert model.config.lm_vocab_size == 34 and model.lm_softmax.weight.shape == (34, 8)
    assert torch.equal(model.lm_softmax.weight[:32], old_weight) and torch.equal(model.lm_softmax.bias[:32], old_bias)
    assert torch.equal(model.lm_softmax.weight[32:], old_weight[[2, 2]])
    torch.testing.assert_close(model.lm_softmax.bias[32:], old_bias[2] + torch.log(torch.tensor([0.6, 0.2])))


@pytest.mark.slow
def test_continue_a_converted_lm_with_new_words_and_resume(lm_dir, tmp_path):
    (tmp_path / "domain.txt").write_text("\n".join(TEXT) + "\n")
    common = [
        "--model_name_or_path",
        str(lm_dir),
        "--train_file",
        str(tmp_path / "domain.txt"),
        "--validation_split_percentage",
        "0",
        "--do_train",
        "--per_device_train_batch_size",
        "2",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(tmp_path / "run"),
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--add_words",
        "3",
        "--add_words_min_count",
        "2",
        "--learning_rate",
        "1e-3",
    ]
    trainer = pretrain.main(common + ["--max_steps", "2"])
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    # plot (5), thin (2), sequel (2): most frequent first, ties alphabetical; "bad", "was"... are in the vocabulary
    assert (tmp_path / "run" / "vocab.txt").read_text().splitlines() == words + ["plot", "sequel", "thin"]
    config = trainer.model.config
    assert (config.lm_vocab_size, config.lm_n_negative_samples, config.bos_token_id) == (35, 8192, 1)

    trainer = pretrain.main(
        common + ["--max_steps", "3", "--resume_from_checkpoint", str(tmp_path / "run" / "checkpoint-2")]
    )
    assert trainer.state.global_step == 3 and trainer.model.config.lm_vocab_size == 35
    model = AutoModelForPreTraining.from_pretrained(tmp_path / "run", trust_remote_code=True)
    tokenizer = ElmoTokenizer.from_pretrained(tmp_path / "run")
    assert model.lm_softmax.weight.shape == (35, 8) and tokenizer.convert_tokens_to_ids("sequel") == 33
    assert (
        cli_main(
            [
                "perplexity",
                "--model",
                str(tmp_path / "run"),
                "--output",
                str(tmp_path / "ppl.json"),
                str(tmp_path / "domain.txt"),
            ]
        )
        == 0
    )
    figures = json.loads((tmp_path / "ppl.json").read_text())[str(tmp_path / "domain.txt")]
    assert figures["words"] == 29 and all(1 < figures[k] < float("inf") for k in ("forward_perplexity", "perplexity"))


def test_pretraining_splits_raw_text_with_the_starting_models_tokenizer(lm_dir, tmp_path):
    """Continuing a language model whose tokenizer segments with jieba: the training text's lines are split by it
    (the new words are jieba's words), not by white space (which made each Chinese line one word)."""
    model = shutil.copytree(lm_dir, tmp_path / "lm-jieba")
    settings = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**settings, "segmenter": "jieba"}))
    (tmp_path / "zh.txt").write_text("我喜欢自然语言处理。\n我喜欢猫。\n", encoding="utf-8")
    pretrain.main(
        [
            "--model_name_or_path",
            str(model),
            "--train_file",
            str(tmp_path / "zh.txt"),
            "--validation_split_percentage",
            "0",
            "--do_train",
            "--per_device_train_batch_size",
            "2",
            "--report_to",
            "none",
            "--disable_tqdm",
            "true",
            "--output_dir",
            str(tmp_path / "run"),
            "--add_words",
            "2",
            "--add_words_min_count",
            "2",
            "--max_steps",
            "1",
        ]
    )
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    # 我, 喜欢 and 。 twice each (the most frequent two, ties in code-point order); white space made no word twice
    assert (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").splitlines() == words + ["。", "喜欢"]
