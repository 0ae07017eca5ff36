"""ElmoForQuestionAnswering: BiDAF's attention flow as its paper writes it, BERT's span loss over the context's
words, the Auto class and remote code, and the question-answering pipeline (answers, character offsets, top_k,
handle_impossible_answer, windows) at batch sizes 1 and 8."""

import pytest
import torch
import torch.nn.functional as F
from tolerance import assert_close_to_reference
from transformers import AutoModelForQuestionAnswering, pipeline

import elmo_transformers
from elmo_transformers import ElmoQuestionAnsweringPipeline
from modeling_elmo import ElmoForQuestionAnswering
from tokenization_elmo import ElmoTokenizer

EXAMPLES = [
    {"question": "Who sat on the bank ?", "context": "He sat  on the bank\tof the river ."},
    {"question": "Where is New York ?", "context": "New  York is in the caf\u00e9 \u00a0state of na\u00efve"},
    {"question": "Empty ?", "context": "word"},
]


@pytest.fixture(scope="module")
def qa_head(tiny_model_dir, tmp_path_factory):
    """A QA head on the tiny model (seeded random layers, sharp logits), saved with its tokenizer."""
    torch.manual_seed(0)
    model = ElmoForQuestionAnswering.from_pretrained(
        tiny_model_dir, task_encoder="lstm", task_encoder_dim=6, dropout=0.0
    ).eval()
    with torch.no_grad():
        model.span_outputs.weight.mul_(20)
    folder = tmp_path_factory.mktemp("qa-head")
    model.save_pretrained(folder)
    ElmoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return model, ElmoTokenizer.from_pretrained(folder), folder


def attention_flow_by_hand(flow, c, q):
    """BiDAF (Seo et al. 2017) eqs. 1-3 for one example without padding, word by word."""
    w = flow.similarity.weight[0]
    S = torch.stack(
        [
            torch.stack([w @ torch.cat([c[t], q[j], c[t] * q[j]]) + flow.similarity.bias[0] for j in range(len(q))])
            for t in range(len(c))
        ]
    )
    u = torch.stack([sum(a * q[j] for j, a in enumerate(torch.softmax(S[t], 0))) for t in range(len(c))])
    b = torch.softmax(S.max(dim=1).values, 0)
    h = sum(b[t] * c[t] for t in range(len(c)))
    return torch.stack([torch.cat([c[t], u[t], c[t] * u[t], c[t] * h]) for t in range(len(c))])


def test_attention_flow_is_bidaf_and_ignores_padding(qa_head):
    model, _, _ = qa_head
    torch.manual_seed(1)
    c, q = torch.randn(5, 12), torch.randn(3, 12)
    padded_c, padded_q = torch.randn(2, 7, 12), torch.randn(2, 4, 12)  # padding filled with noise: must not count
    padded_c[0, :5], padded_q[0, :3] = c, q
    c_mask, q_mask = torch.zeros(2, 7, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.bool)
    c_mask[0, :5], q_mask[0, :3], c_mask[1], q_mask[1] = True, True, True, True
    with torch.no_grad():
        got = model.attention_flow(padded_c, c_mask, padded_q, q_mask)[0, :5]
        assert_close_to_reference(got, attention_flow_by_hand(model.attention_flow, c, q), what="G")


def test_span_logits_and_loss_over_the_context_words(qa_head, tiny):
    model, tokenizer, _ = qa_head
    base, _ = tiny
    batch = tokenizer(
        [e["question"] for e in EXAMPLES], [e["context"] for e in EXAMPLES], padding=True, return_tensors="pt"
    )
    starts, ends = torch.tensor([0, 0, 0]), torch.tensor([0, 1, 5])  # the third's end is past its one word: ignored
    seen = []
    hook = model.elmo.register_forward_hook(lambda module, args, output: seen.append(output))
    with torch.no_grad():
        out = model(**batch, start_positions=starts, end_positions=ends)
    hook.remove()
    context = "New  York is in the caf\u00e9 \u00a0state of na\u00efve"
    with torch.no_grad():  # the context's ELMo vectors are those it gets alone
        alone = base(**tokenizer([context], return_tensors="pt")).last_hidden_state[0]
    assert_close_to_reference(seen[1].last_hidden_state[1, : len(alone)], alone, what="context alone")
    lengths = batch["pair_attention_mask"].sum(1)
    assert out.start_logits.shape == out.end_logits.shape == batch["pair_attention_mask"].shape
    assert (out.start_logits[2, 1:] == torch.finfo(torch.float32).min).all()  # past the words: never chosen
    start_loss = F.cross_entropy(out.start_logits, starts)
    end_loss = sum(F.cross_entropy(out.end_logits[i : i + 1, : lengths[i]], ends[i : i + 1]) for i in (0, 1)) / 2
    assert_close_to_reference(out.loss, (start_loss + end_loss) / 2, what="loss")
    with torch.no_grad():  # no answer within its context's words: nothing to learn from, a loss of 0 (not NaN)
        nothing = model(**batch, start_positions=torch.tensor([9, -1, 1]), end_positions=torch.tensor([9, 9, 1]))
    assert nothing.loss.item() == 0.0
    with pytest.raises(ValueError, match="needs the context as pair_input_ids"):
        model(input_ids=batch["input_ids"])
    with pytest.raises(ValueError, match="pair_input_ids holds 2 second sentences for 3 first ones"):
        model(input_ids=batch["input_ids"], pair_input_ids=batch["pair_input_ids"][:2])
    for positions in ({"start_positions": starts}, {"end_positions": ends}):  # a loss of half the answer: none
        with pytest.raises(ValueError, match="start_positions and end_positions go together"):
            model(**batch, **positions)


def test_auto_class_and_remote_code_load_the_head(qa_head):
    model, tokenizer, folder = qa_head
    batch = tokenizer(["Who ?"], ["He sat ."], return_tensors="pt")
    elmo_transformers.register()
    for kwargs in ({}, {"trust_remote_code": True}):
        loaded = AutoModelForQuestionAnswering.from_pretrained(folder, **kwargs).eval()
        assert type(loaded).__name__ == "ElmoForQuestionAnswering"
        with torch.no_grad():
            torch.testing.assert_close(loaded(**batch).start_logits, model(**batch).start_logits)


def best_by_hand(model, tokenizer, example, max_answer_len=15):
    """The best span of the whole context (one window), by brute force over the word pairs, with its score."""
    words, spans = tokenizer.segment(example["context"])
    batch = tokenizer([tokenizer.tokenize(example["question"])], [words], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    p_start, p_end = out.start_logits[0].softmax(0), out.end_logits[0].softmax(0)
    candidates = [
        (float(p_start[s] * p_end[e]), s, e)
        for s in range(len(words))
        for e in range(s, len(words))
        if e - s < max_answer_len
    ]
    score, s, e = max(candidates)
    return {
        "score": score,
        "start": spans[s][0],
        "end": spans[e][1],
        "answer": example["context"][spans[s][0] : spans[e][1]],
    }


@pytest.mark.parametrize("batch_size", [1, 8])
def test_pipeline_answers_with_spans_of_the_context(qa_head, batch_size):
    model, tokenizer, folder = qa_head
    qa = pipeline("question-answering", model=str(folder), pipeline_class=ElmoQuestionAnsweringPipeline)
    got = qa(EXAMPLES, batch_size=batch_size)
    for example, answer in zip(EXAMPLES, got):
        want = best_by_hand(model, tokenizer, example)
        assert (answer["start"], answer["end"], answer["answer"]) == (want["start"], want["end"], want["answer"])
        assert answer["answer"] == example["context"][answer["start"] : answer["end"]]
        assert_close_to_reference(answer["score"], want["score"], what=example["question"])
    one = qa(question=EXAMPLES[0]["question"], context=EXAMPLES[0]["context"])
    assert one["answer"] == got[0]["answer"] and qa([EXAMPLES[0]])["answer"] == got[0]["answer"]
    ranked = qa(EXAMPLES[0], top_k=3, handle_impossible_answer=True)
    assert len(ranked) == 3 and [a["score"] for a in ranked] == sorted((a["score"] for a in ranked), reverse=True)
    assert "" in [a["answer"] for a in qa(EXAMPLES[0], top_k=100, handle_impossible_answer=True)]
    assert all(a["answer"] for a in qa(EXAMPLES[0], top_k=100))  # no empty answer unless asked for
    assert qa(question="Who ?", context=" ") == {"score": 1.0, "start": 0, "end": 0, "answer": ""}


def test_long_contexts_are_read_in_windows_of_words(qa_head):
    _, _, folder = qa_head
    qa = pipeline("question-answering", model=str(folder), pipeline_class=ElmoQuestionAnsweringPipeline)
    context = " ".join(f"w{i}" for i in range(23))
    windows = []
    original = ElmoQuestionAnsweringPipeline._forward
    ElmoQuestionAnsweringPipeline._forward = lambda self, inputs: (
        windows.append((inputs["offset"], int(inputs["pair_attention_mask"].sum()))) or original(self, inputs)
    )
    try:
        answers = qa(question="w3 ?", context=context, max_seq_len=10, doc_stride=4, top_k=50)
    finally:
        ElmoQuestionAnsweringPipeline._forward = original
    assert windows == [(0, 10), (6, 10), (12, 10), (18, 5)]  # every word read, 4 words shared by neighbours
    assert all(a["answer"] == context[a["start"] : a["end"]] for a in answers)
    assert len({(a["start"], a["end"]) for a in answers}) == len(answers)  # a span of two windows: once
    with pytest.raises(ValueError, match=r"doc_stride \(10\) must be less than max_seq_len \(10\)"):
        qa(question="w3 ?", context=context, max_seq_len=10, doc_stride=10)


def test_push_carries_the_question_answering_head(qa_head, tmp_path, caplog):
    """The card says the task (pipeline tag question-answering, no labels) and the fresh-process check loads the
    head with AutoModelForQuestionAnswering and runs its pipeline from the folder's code."""
    from huggingface_hub import ModelCard

    _, _, folder = qa_head
    pushed = elmo_transformers.push(str(folder), "me/elmo-qa", dry_run=True, staging_dir=str(tmp_path / "stage"))
    assert "ElmoForQuestionAnswering (AutoModelForQuestionAnswering)" in pushed.check
    assert "question-answering pipeline: ElmoQuestionAnsweringPipeline" in pushed.check
    card = ModelCard.load(tmp_path / "stage" / "README.md")
    assert card.data.pipeline_tag == "question-answering" and "## Labels" not in card.text
    assert "AutoModelForQuestionAnswering.from_pretrained" in card.text


def test_a_question_without_words_is_read_as_in_a_batch(qa_head):
    """An empty or white-space question is a question of no words: alone it gives the logits it gets beside a
    question with words (the attention flow over no word), and the pipeline answers it."""
    model, tokenizer, folder = qa_head
    context = "He sat on the bank of the river ."
    with torch.no_grad():
        alone = model(**tokenizer([" \t"], [context], return_tensors="pt"))
        batch = model(**tokenizer(["", "Who sat ?"], [context, context], padding=True, return_tensors="pt"))
    assert_close_to_reference(alone.start_logits[0], batch.start_logits[0], what="start logits")
    assert_close_to_reference(alone.end_logits[0], batch.end_logits[0], what="end logits")
    qa = pipeline("question-answering", model=str(folder), pipeline_class=ElmoQuestionAnsweringPipeline)
    for question in ("", "   "):
        answer = qa(question=question, context=context)
        assert answer["answer"] and answer["answer"] == context[answer["start"] : answer["end"]]


def test_the_pipeline_refuses_arguments_it_cannot_honour_and_answers_no_example_with_none(qa_head):
    """A `handle_impossible_answer` that is not a bool ("no" would add the empty answer) and counts below their
    least are refused, each naming its unit; no example (an empty list, or two empty lists) gives no answer."""
    _, _, folder = qa_head
    qa = pipeline("question-answering", model=str(folder), pipeline_class=ElmoQuestionAnsweringPipeline)
    example = EXAMPLES[0]
    with pytest.raises(ValueError, match="handle_impossible_answer must be True or False, got 'no'"):
        qa(example, handle_impossible_answer="no")
    with pytest.raises(ValueError, match=r"top_k must be an int of at least 1 \(answers\), got 0"):
        qa(example, top_k=0)
    with pytest.raises(ValueError, match=r"max_seq_len must be an int of at least 1 \(words\), got -1"):
        qa(example, max_seq_len=-1)
    assert qa([]) == [] and qa(question=[], context=[]) == []
