"""transformers' own test suites on ELMo, as transformers tests one of its own models (its
tests/models/bert/test_modeling_bert.py): `ModelTesterMixin` on the four model classes, `ConfigTester` on ElmoConfig
and `TokenizerTesterMixin` on ElmoTokenizer. The model tester is test_modeling_elmo.py's `ElmoModelTester`, whose own
per-class checks run there without the suites.

The suites are transformers' test files at the installed version, from its source distribution on PyPI (not kept
here): .ci/run fetches them into `.transformers-suites/` and sets ELMO_TRANSFORMERS_SUITES, which makes them
required; a local run without them skips this module, saying how to fetch them (docs/contract.md).
A test is turned off only where it cannot apply to a char-level biLM, each with its reason in one line.
"""

import copy
import importlib
import itertools
import os
import sys
import tempfile
import types
import unittest
import warnings
from pathlib import Path

import pytest
import transformers

REPO = Path(__file__).resolve().parents[3]
SUITES = Path(
    os.environ.get("ELMO_TRANSFORMERS_SUITES")
    or REPO / ".transformers-suites" / f"transformers-{transformers.__version__}" / "tests"
)
# The three suite files; the empty __init__.py that the source distribution leaves out is added by .ci/run.
SUITE_FILES = ("__init__.py", "test_modeling_common.py", "test_configuration_common.py", "test_tokenization_common.py")
if not all((SUITES / name).is_file() for name in SUITE_FILES):
    if os.environ.get("ELMO_TRANSFORMERS_SUITES"):
        raise RuntimeError(f"ELMO_TRANSFORMERS_SUITES={SUITES} does not hold transformers' {', '.join(SUITE_FILES)}")
    pytest.skip(
        f"transformers {transformers.__version__}'s test suites are not in {SUITES}: fetch them as .ci/run "
        "does (docs/contract.md)",
        allow_module_level=True,
    )


def load_suites():
    """transformers' tests folder as the package `transformers_suites`, with stand-ins for what it imports from files
    its source distribution leaves out."""
    package = types.ModuleType("transformers_suites")
    package.__path__ = [str(SUITES)]
    sys.modules["transformers_suites"] = package
    stand_ins = {
        # transformers' export tests are not in the source distribution; tests/runtime/test_onnx_export.py exports ELMo
        # through transformers' exporter instead.
        "exporters.test_export": {"ExportTesterMixin": type("ExportTesterMixin", (), {})},
        # ELMo does not generate; the suite only asks whether a test class inherits this mixin.
        "generation.test_utils": {"GenerationTesterMixin": type("GenerationTesterMixin", (), {})},
        # ConfigTester's check_config_arguments_init reads it; that one check is skipped below.
        "utils.test_configuration_utils": {"config_common_kwargs": None},
    }
    for name, attributes in stand_ins.items():
        parent = "transformers_suites"
        for part in name.split(".")[:-1]:
            parent = f"{parent}.{part}"
            sys.modules.setdefault(parent, types.ModuleType(parent)).__path__ = []
        module = types.ModuleType(f"transformers_suites.{name}")
        module.__dict__.update(attributes)
        sys.modules[module.__name__] = module
    with warnings.catch_warnings():  # the marks transformers' own conftest registers (flash_attn_test...)
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        return [importlib.import_module(f"transformers_suites.{name[:-3]}") for name in SUITE_FILES[1:]]


modeling_common, configuration_common, tokenization_common = load_suites()

import torch  # noqa: E402

import elmo_transformers  # noqa: E402
from configuration_elmo import ELMO_AUTO_MAP, ElmoConfig  # noqa: E402
from modeling_elmo import (  # noqa: E402
    ElmoForLanguageModeling,
    ElmoForQuestionAnswering,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
)
from tokenization_elmo import ElmoTokenizer  # noqa: E402

from test_modeling_elmo import ElmoModelTester  # noqa: E402  (one tester: test_modeling_elmo.py's fast tests use it)


elmo_transformers.register()  # model type "elmo" in the Auto classes, as the package registers it for its users
# The suite tells a base model (which it does not train) and the heads (for which it makes labels) by transformers'
# tables of its own models' class names, which registering with the Auto classes does not change: ELMo's classes join
# copies of those tables in the suite's module.
for _table, _auto_class in (
    ("MODEL_MAPPING_NAMES", "AutoModel"),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "AutoModelForTokenClassification"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "AutoModelForSequenceClassification"),
    ("MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "AutoModelForQuestionAnswering"),
):
    setattr(
        modeling_common,
        _table,
        {**getattr(modeling_common, _table), "elmo": ELMO_AUTO_MAP[_auto_class].rsplit(".", 1)[1]},
    )


class ElmoModelTest(modeling_common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        ElmoModel,
        ElmoForLanguageModeling,
        ElmoForSequenceClassification,
        ElmoForTokenClassification,
        ElmoForQuestionAnswering,
    )
    has_attentions = False  # a biLSTM: no attention weights
    test_resize_embeddings = False  # the char embedding's rows are fixed (bytes and markers), as CANINE's

    def setUp(self):
        self.model_tester = ElmoModelTester(self)
        # The common names but num_attention_heads: a biLSTM has no attention heads.
        self.config_tester = configuration_common.ConfigTester(
            self,
            config_class=ElmoConfig,
            common_properties=["hidden_size", "num_hidden_layers"],
            n_layers=2,
            lstm_dim=16,
            projection_dim=8,
            lm_vocab_size=99,
        )

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        """The suite's inputs, and the LM's labels (as BERT's test adds its pre-training labels): each sentence's
        word ids then </S>, -100 after; question answering's context (`pair_input_ids`: the tester's sentences
        again, as the suite's questions are its sentences)."""
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if model_class is ElmoForQuestionAnswering:
            inputs_dict["pair_input_ids"] = inputs_dict["input_ids"]
            inputs_dict["pair_attention_mask"] = inputs_dict["attention_mask"]
        if return_labels and model_class is ElmoForLanguageModeling:
            inputs_dict["labels"] = self.model_tester.prepare_lm_labels(inputs_dict["attention_mask"])
        return inputs_dict

    def test_config(self):
        tester = self.config_tester
        for check in (
            "create_and_test_config_common_properties",
            "create_and_test_config_to_json_string",
            "create_and_test_config_to_json_file",
            "create_and_test_config_from_and_save_pretrained",
            "create_and_test_config_from_and_save_pretrained_subfolder",
            "create_and_test_config_from_and_save_pretrained_composite",
            "create_and_test_config_with_num_labels",
            "create_and_test_config_from_pretrained_custom_kwargs",
            "check_config_can_be_init_without_params",
        ):
            getattr(tester, check)()

    def test_model_outputs_equivalence(self):
        """The suite's test, comparing the same outputs, except that a bool tensor is compared by equality:
        ElmoModelOutput.mask (which positions are words) is bool, as AllenNLP's Elmo gives it, and the suite's own
        failure message subtracts the two outputs before anything is compared, which torch refuses for bools."""
        config, inputs_dict = self.model_tester.prepare_config_and_inputs_for_common()
        for model_class in self.all_model_classes:
            model = model_class(copy.deepcopy(config)).eval()
            for return_labels, options in itertools.product((False, True), ({}, {"output_hidden_states": True})):
                inputs = self._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
                with torch.no_grad():
                    as_tuple = model(**inputs, return_dict=False, **options)
                    as_dict = model(**inputs, return_dict=True, **options)
                self.assertIsInstance(as_tuple, tuple)
                self.model_tester.check_same_outputs(as_tuple, as_dict.to_tuple())

    # It shrinks the input vocabulary by setting vocab_size and feeds word ids [batch, words]; ELMo reads char ids.
    test_load_with_mismatched_shapes = unittest.skip(
        "vocab_size as the input vocabulary: ELMo's input_ids are char ids (its vocab_size is the LM's words)"
    )(lambda self: None)

    @unittest.skip("config_common_kwargs, which it reads, is in transformers' tests/utils, not in its sdist")
    def test_config_arguments_init(self):
        self.config_tester.check_config_arguments_init()


def inapplicable(reason):
    """A suite test that cannot apply to ELMo, for `reason`."""
    return unittest.skip(reason)(lambda self: None)


# Why a tokenizer test cannot apply, in one line each.
LEFT_PADDING = "left padding: the biLM reads each sentence from position 0, so ElmoTokenizer pads on the right only"
PAIRS = (
    "a text pair as one sequence with token types: ElmoTokenizer gives the second sentence apart, as pair_input_ids, "
    "since ELMo reads each sentence alone, and has no token types"
)
WORD_IDS = (
    "input_ids as one id per word: ELMo's hold a row of char ids per word (the word vocabulary gives only the "
    "LM's targets), and a padded word is an all-zero row, not pad_token_id"
)
BOUNDARY_WORDS = (
    "another bos or eos token: ELMo's are <S> and </S>, which the model adds itself; another would "
    "misname the LM's targets"
)


class ElmoTokenizationTest(tokenization_common.TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = ElmoTokenizer
    test_padding_side_in_kwargs = test_batch_encode_plus_padding = inapplicable(LEFT_PADDING)
    test_call = test_mask_output = test_number_of_added_tokens = inapplicable(PAIRS)
    test_special_tokens_mask_input_pairs = test_token_type_ids = inapplicable(PAIRS)
    test_internal_consistency = test_pretokenized_inputs = test_padding_with_attention_mask = inapplicable(WORD_IDS)
    test_maximum_encoding_length_single_input = test_maximum_encoding_length_pair_input = inapplicable(WORD_IDS)
    test_encode_basic_padding = test_batch_encode_dynamic_overflowing = inapplicable(WORD_IDS)
    test_encode_plus_with_padding_0 = test_encode_plus_with_padding_1 = inapplicable(WORD_IDS)
    test_added_tokens_serialization = inapplicable(BOUNDARY_WORDS)
    test_bos_token_with_add_bos_token_true = test_bos_token_with_add_bos_token_false = inapplicable(BOUNDARY_WORDS)

    @classmethod
    def setUpClass(cls):
        # The mixin's own setUpClass reads tests/fixtures/sample_text.txt, which the sdist does not hold.
        cls._data = "This is a test .\nI was born in 92000 , and this is falsé ."
        cls.tmpdirname = tempfile.mkdtemp()
        ElmoTokenizer().save_pretrained(cls.tmpdirname)
        cls.tokenizers_list = [(ElmoTokenizer, cls.tmpdirname, {})]
