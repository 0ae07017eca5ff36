"""The demo's web page (`demo --web`, app.py) in a real browser: Playwright driving Debian's `chromium` headless.

The page is opened, typed into and clicked as a user does; what it shows is read back and compared with the model's
numbers computed here independently (each sentence alone, through the model classes and the fill-mask pipeline).
The language-model fixture (allennlp-lm-tiny, converted with its softmax) is served by the command itself in another
process, the shipped model and a biLM without softmax by `page.build` in this one; one server each for the module.
Without a browser (or Playwright, or Gradio) these tests are skipped with the reason.

The README's screenshot comes from `test_the_shipped_model_page`: ELMO_DEMO_SCREENSHOT=docs/demo-page.png
.venv/bin/python -m pytest -q tests/demo/test_web_demo.py -k shipped
"""

import os
import select
import shutil
import socket
import subprocess
import time

import pytest
import torch
from conftest import SHIPPED, start_command
from tolerance import ATOL, RTOL

pytestmark = pytest.mark.slow  # a browser and web servers: seconds

gr = pytest.importorskip("gradio", reason="the web page needs Gradio (pip install '.[demo]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need Playwright (pip install .[test])")
expect = sync_api.expect
# A request waits in the page's one queue behind the others and the machine runs other tests beside these:
# Playwright's default of 5 s for a page to show what is expected is too short for that.
expect.set_options(timeout=60_000)

SENTENCES = [
    "The river bank was muddy .",
    "He sat on the bank of the river .",
    "The bank lends money .",
    "A bank is a bank .",
]  # "bank" twice in the last: five uses
TEXT = "He sat on the <mask> of the river ."
SHOWN = 0.0005  # three decimals


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium): the web page tests need a browser")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])  # root in containers
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def pages_closed(request):
    """Each test's pages are closed after it: an open Gradio page keeps its server connection and its animations,
    which the browser goes on drawing through the tests that follow."""
    yield
    if "browser" in request.fixturenames:
        for context in request.getfixturevalue("browser").contexts:
            context.close()


@pytest.fixture(scope="module")
def lm_server(lm_dir, tmp_path_factory):
    """`elmo-transformers demo --web` on the LM fixture: (the process, the URL it printed)."""
    log = tmp_path_factory.mktemp("server") / "stderr.txt"
    with open(log, "w") as stderr:
        process = start_command(
            "demo", "--web", "--model", lm_dir, "--port", free_port(), stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        ready, deadline = "", time.monotonic() + 180
        while not ready.startswith("ELMo demo page: ") and time.monotonic() < deadline and process.poll() is None:
            if select.select([process.stdout], [], [], 1)[0]:
                ready = process.stdout.readline()
        assert ready.startswith("ELMo demo page: http://127.0.0.1:"), f"no URL printed: {log.read_text()[-2000:]}"
        yield process, ready.split()[3]
    finally:
        process.terminate()
        process.wait(timeout=30)


def served(model):
    """A page for `model` served from this process: (the Blocks, its URL)."""
    from elmo_transformers.demo import page, server

    blocks = page.build(str(model))
    blocks.launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        quiet=True,
        prevent_thread_lock=True,
        **server.launch_options(),
    )
    return blocks


@pytest.fixture(scope="module")
def shipped_server():
    blocks = served(SHIPPED)
    yield blocks.local_url
    blocks.close()


@pytest.fixture(scope="module")
def bilm_server(tiny_model_dir):
    blocks = served(tiny_model_dir)
    yield blocks.local_url
    blocks.close()


def open_page(browser, url, wait=True):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    if wait:
        expect(page.locator("#senses-message")).to_contain_text("uses")  # the example, on load
    return page


def compare(page, sentences, word):
    page.locator("#sentences textarea").fill("\n".join(sentences))
    page.locator("#word").locator("input, textarea").fill(word)
    page.click("#compare")


def table(page, element, rows):
    """The cells of the table `element` once it shows `rows` rows (Gradio draws a table after the event's message)."""
    read = """id => Array.from(document.querySelectorAll(`#${id} [role=row]`))
        .map(row => Array.from(row.querySelectorAll('[role=gridcell]')).map(cell => cell.innerText.trim()))
        .filter(cells => cells.length && cells.some(c => c))"""
    deadline = time.monotonic() + 60
    while len(cells := page.evaluate(read, element)) != rows and time.monotonic() < deadline:
        time.sleep(0.1)
    return cells


def drawn(page, element):
    """True when the plot `element` shows an image that loaded (Gradio shows a matplotlib figure as a PNG)."""
    return page.evaluate(
        """id => Array.from(document.querySelectorAll(`#${id} img`))
        .some(img => img.complete && img.naturalWidth > 100)""",
        element,
    )


def word_vectors(folder, sentences, word):
    """The ELMo vectors (last_hidden_state) of `word`'s uses, each sentence run alone."""
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
    vectors = []
    with torch.no_grad():
        for sentence in sentences:
            out = model(**tokenizer([sentence], return_tensors="pt")).last_hidden_state[0]
            vectors += [out[j] for j, w in enumerate(sentence.split()) if w.lower() == word]
    return vectors


def assert_table_is_cosines(rows, vectors):
    assert len(rows) == len(vectors), rows
    for i, row in enumerate(rows):
        assert row[0].startswith(f"[{i + 1}]") and len(row) == len(vectors) + 1, row
        for j, shown in enumerate(row[1:]):
            reference = torch.cosine_similarity(vectors[i], vectors[j], dim=0).item()
            assert len(shown.split(".")[1]) == 3, shown
            assert abs(float(shown) - reference) <= SHOWN + ATOL + RTOL * abs(reference), (i, j, shown, reference)


def test_word_senses_show_the_models_similarities_and_plots(browser, lm_server, lm_dir, tmp_path):
    page = open_page(browser, lm_server[1])
    compare(page, SENTENCES, "bank")
    expect(page.locator("#senses-message")).to_contain_text('"bank", 5 uses')
    assert_table_is_cosines(table(page, "similarity", 5), word_vectors(lm_dir, SENTENCES, "bank"))
    assert drawn(page, "similarity-plot") and drawn(page, "projection-plot")
    before = page.locator("#similarity-plot img").get_attribute("src")
    page.locator("#layer").get_by_text("layer 0", exact=True).click()
    expect(page.locator("#similarity-plot img")).not_to_have_attribute("src", before)
    assert drawn(page, "similarity-plot") and drawn(page, "projection-plot")
    page.screenshot(path=tmp_path / "word-senses.png", full_page=True)
    assert (tmp_path / "word-senses.png").stat().st_size > 10_000


def test_fill_mask_shows_the_pipelines_top_ten(browser, lm_server, lm_dir):
    from transformers import pipeline

    from elmo_transformers import ElmoFillMaskPipeline

    page = open_page(browser, lm_server[1])
    page.locator("#fill-text").locator("input, textarea").fill(TEXT)
    page.click("#fill")
    expected = pipeline("fill-mask", model=str(lm_dir), pipeline_class=ElmoFillMaskPipeline)(TEXT, top_k=10)
    expect(page.locator("#fill-result textarea")).to_have_value(
        "\n".join(f"{r['token_str']}  {r['score']:.4f}" for r in expected)
    )
    assert page.input_value("#fill-result textarea").split()[0] == expected[0]["token_str"]
    assert drawn(page, "fill-plot")


def test_surprisal_shows_each_words_log_probabilities(browser, lm_server, lm_dir):
    from modeling_elmo import ElmoForLanguageModeling
    from tokenization_elmo import ElmoTokenizer

    text = "The bank of the river was muddy zxqvbn ."  # zxqvbn: not in the vocabulary
    page = open_page(browser, lm_server[1])
    page.locator("#score-text").locator("input, textarea").fill(text)
    page.click("#score")
    expect(page.locator("#surprisal-table")).to_contain_text("muddy")
    rows = table(page, "surprisal-table", len(text.split()))
    model, tokenizer = ElmoForLanguageModeling.from_pretrained(lm_dir).eval(), ElmoTokenizer.from_pretrained(lm_dir)
    words = text.split()
    with torch.no_grad():  # the model's own logits: forward position j and backward position j + 1 predict word j
        out = model(**tokenizer([text], return_tensors="pt"))
    ids = tokenizer.convert_tokens_to_ids(words)
    forward = out.forward_logits[0].log_softmax(-1)[range(len(words)), ids]
    backward = out.backward_logits[0].log_softmax(-1)[[j + 1 for j in range(len(words))], ids]
    assert [row[0] for row in rows] == words
    vocabulary = tokenizer.get_vocab()
    for row, f, b in zip(rows, forward.tolist(), backward.tolist()):
        if row[0] not in vocabulary:  # the softmax scores <UNK> for it: no score of its own, no colour
            assert row[1:] == ["unknown"] * 3, row
            continue
        for shown, reference in zip(row[1:], (f, b, (f + b) / 2)):
            assert abs(float(shown) - reference) <= 0.005 + ATOL + RTOL * abs(reference), (row, f, b)
    assert rows[words.index("zxqvbn")][1:] == ["unknown"] * 3
    assert sum(row[1] != "unknown" for row in rows) >= 3
    assert drawn(page, "surprisal")


def test_bad_input_is_a_message_and_the_server_goes_on(browser, lm_server):
    process, url = lm_server
    page = open_page(browser, url)
    cases = [
        ([""], "bank", "no sentences given"),
        (SENTENCES, "", "no word given"),
        (SENTENCES, "castle", "'castle' occurs in no sentence"),
        (SENTENCES, "lends", "'lends' occurs only once"),
        (SENTENCES, "x" * 5000, "the word is 5,000 characters long"),
        (["The bank ."] * 201, "bank", "201 sentences: the limit is 200"),
        (["The bank ."] * 51, "bank", "'bank' occurs 51 times: the limit is 50 uses"),
        (["bank " * 10_005], "bank", "10,005 words: the limit is 10,000"),
    ]
    for sentences, word, message in cases:
        compare(page, sentences, word)
        expect(page.locator("#senses-message")).to_contain_text(message)
        assert table(page, "similarity", 0) == [] and not drawn(page, "similarity-plot")
    page.locator("#fill-text").locator("input, textarea").fill("no mask here")
    page.click("#fill")
    expect(page.locator("#fill-result textarea")).to_have_value(
        "the text has 0 <mask> words: put exactly one <mask>, as a word of its own, where a word should be guessed"
    )
    compare(page, SENTENCES[:2], "bank")  # still serving
    expect(page.locator("#senses-message")).to_contain_text('"bank", 2 uses')
    assert process.poll() is None


def test_several_users_at_once(browser, lm_server, lm_dir):
    requests = {2: SENTENCES[:2], 3: SENTENCES[:3], 5: SENTENCES}  # uses of "bank": sentences
    pages = {uses: open_page(browser, lm_server[1], wait=False) for uses in requests}  # each queues its example
    for uses, page in pages.items():
        page.wait_for_selector("#compare")
        compare(page, requests[uses], "bank")
    for uses, page in pages.items():  # one queue: each page's example, then its request, one after another
        expect(page.locator("#senses-message")).to_contain_text(f'"bank", {uses} uses')
        assert_table_is_cosines(table(page, "similarity", uses), word_vectors(lm_dir, requests[uses], "bank"))


def test_a_bilm_without_softmax_says_why_the_language_model_parts_are_off(browser, bilm_server):
    page = open_page(browser, bilm_server)
    for element in ("#fill-off", "#surprisal-off"):
        expect(page.locator(element)).to_contain_text("without a language-model softmax")
    assert page.locator("#fill-text").count() == 0 and page.locator("#surprisal").count() == 0


def test_the_shipped_model_page(browser, shipped_server, tmp_path):
    """The first visit shows the "bank" example with the shipped model's numbers; the screenshot is the README's."""
    from elmo_transformers.demo.senses import EXAMPLES

    page = browser.new_page(viewport={"width": 1100, "height": 1200}, device_scale_factor=0.75)
    page.goto(shipped_server)
    expect(page.locator("#senses-message")).to_contain_text('"bank", 4 uses')
    assert_table_is_cosines(table(page, "similarity", 4), word_vectors(SHIPPED, EXAMPLES, "bank"))
    expect(page.locator("#fill-result textarea")).not_to_have_value("")
    for element in ("similarity-plot", "projection-plot", "fill-plot", "surprisal"):
        page.wait_for_function("id => document.querySelector(`#${id} img`)?.naturalWidth > 100", arg=element)
    shot = tmp_path / "demo-page.png"
    page.screenshot(path=shot)  # the first screen: word senses
    if os.environ.get("ELMO_DEMO_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["ELMO_DEMO_SCREENSHOT"])


def test_the_command_refuses_a_busy_port_and_a_model_that_is_not_elmo(tmp_path, capsys):
    from elmo_transformers.cli import main

    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--web", "--port", str(port)]) == 1
        assert capsys.readouterr().err == (
            f"error: --port {port}: cannot serve on 127.0.0.1:{port} (Address already "
            "in use): stop what uses it, or give another --port\n"
        )
    for model, message in (
        (tmp_path, "is not an ELMo model: its config.json has model_type 'bert', not 'elmo'"),
        (tmp_path / "missing", "no such folder"),
    ):
        assert main(["demo", "--web", "--model", str(model), "--port", str(free_port())]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_what_users_type_is_shown_as_text_and_nothing_is_fetched(browser, lm_server):
    """HTML and Markdown typed into the page are shown as typed: no element is made from them and no image is
    fetched (a request to the address in the text would be seen here)."""
    process, url = lm_server
    page = open_page(browser, url)
    fetched = []
    page.on("request", lambda request: fetched.append(request.url) if "example.invalid" in request.url else None)
    typed = [
        'The bank <img src="http://example.invalid/x.png"> was <b>muddy</b> .',
        "The bank <svg onload=alert(1)></svg> lends [money](http://example.invalid/) **now** .",
    ]
    compare(page, typed, "bank")
    message = page.locator("#senses-message")
    expect(message).to_contain_text('"bank", 2 uses')
    expect(message).to_contain_text('<img src="http://example.invalid/x.png">')
    expect(message).to_contain_text("[money](http://example.invalid/) **now**")
    assert message.locator("img, svg, b, a, strong").count() == 0
    compare(page, SENTENCES, "<b>bank</b>")
    expect(message).to_contain_text("'<b>bank</b>' occurs in no sentence")
    assert message.locator("b").count() == 0 and not fetched and process.poll() is None


def test_a_request_over_the_limits_is_refused_and_the_next_one_served(browser, lm_server):
    process, url = lm_server
    page = open_page(browser, url)
    compare(page, ["the bank " + "word " * 9_797] + ["bank"] * 199, "bank")
    expect(page.locator("#senses-message")).to_contain_text(
        "a sentence of 9,799 words (line 1): the limit is 500 words a sentence"
    )
    compare(page, SENTENCES, "bank")
    expect(page.locator("#senses-message")).to_contain_text('"bank", 5 uses')
    assert process.poll() is None


def test_the_page_takes_no_uploads(lm_server):
    """The page reads text only: Gradio's upload route refuses any file (413) and stores nothing."""
    import httpx

    response = httpx.post(lm_server[1] + "gradio_api/upload", files={"files": ("big.bin", b"\0" * 300_000)})
    assert response.status_code == 413, response.text


def test_the_page_names_its_model(browser, shipped_server):
    page = open_page(browser, shipped_server)
    expect(page.get_by_text("Model: elmo-en-small.")).to_be_visible()


def test_the_command_names_the_option_at_fault_and_warns_on_every_interface(capsys):
    from elmo_transformers.cli import main
    from elmo_transformers.demo.server import public_warning

    assert main(["demo", "--web", "--host", "192.0.2.1", "--port", str(free_port())]) == 1  # TEST-NET: not ours
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --host 192.0.2.1: cannot serve on 192.0.2.1:")
        and "not an address of this machine" in err
        and err.count("\n") == 1
    ), err
    assert public_warning("0.0.0.0") == (
        "warning: serving on every network interface (0.0.0.0): anyone who can "
        "reach this machine can use the page; host 127.0.0.1 serves this machine "
        "only"
    )
    assert public_warning("").startswith("warning: serving on every network interface (all): ")
    assert public_warning("127.0.0.1") is None
