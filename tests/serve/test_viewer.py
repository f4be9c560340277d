"""The trace viewer in headless Debian Chromium (selenium + chromedriver, no browser download):
ask a demo question with dragin, check what the page draws, open a saved trace and a
predictions.jsonl; screenshots go to the test artifacts folder."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from dynrag.datasets.loaders import QAExample
from dynrag.eval.summary import make_record
from tests.servers import artifacts_dir
from tests.waiting import HANG_GUARD_S

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# Flags for a sandbox with no network beyond loopback (docs/dependencies.md).
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for tool in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(tool), f"{tool} is missing: `make test` installs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_for(driver, condition, seconds=HANG_GUARD_S):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=0.25).until(condition)


def shaded(driver) -> list:
    return [w for w in driver.find_elements("css selector", "#answer-text .w")
            if float(w.get_attribute("data-score") or 0) > 0.02 and w.value_of_css_property("background-color")
            not in ("rgba(0, 0, 0, 0)", "transparent")]


def test_ask_with_dragin_draws_shaded_words_and_retrievals(browser, served, demo_question):
    from selenium.webdriver.support.ui import Select

    browser.get(served.root + "/")
    key_bar = browser.find_element("id", "key-bar")
    wait_for(browser, lambda d: key_bar.is_displayed(), 30)  # the page loads, then asks for the key
    browser.find_element("id", "api-key").send_keys(served.key)
    browser.find_element("id", "key-save").click()
    wait_for(browser, lambda d: len(Select(d.find_element("id", "method")).options) > 3, 30)
    assert not key_bar.is_displayed()
    Select(browser.find_element("id", "method")).select_by_value("dragin")
    browser.find_element("css selector", "#options-box summary").click()
    browser.find_element("id", "opt-theta").send_keys("0.05")
    browser.find_element("id", "opt-max_retrievals").send_keys("2")
    browser.find_element("id", "question").send_keys(demo_question.question)
    browser.find_element("id", "ask").click()
    wait_for(browser, lambda d: d.find_element("id", "status").text.startswith(("answered", "error")))
    assert browser.find_element("id", "status").text.startswith("answered"), browser.find_element("id", "status").text

    assert browser.find_element("id", "q-text").text == demo_question.question
    final = browser.find_element("id", "final-answer").text
    assert final and final != "(no answer)"
    assert "dragin" in browser.find_element("id", "meta").text
    words = browser.find_elements("css selector", "#answer-text .w")
    assert len(words) > 5 and len(shaded(browser)) >= 1
    markers = browser.find_elements("css selector", "#answer-text .retrieval-marker")
    blocks = browser.find_elements("css selector", "#retrievals .retrieval")
    assert len(markers) >= 1 and len(markers) == len(blocks)
    query = blocks[0].find_element("css selector", ".query").text
    passages = blocks[0].find_elements("css selector", ".passage")
    assert query and query != "(empty)" and len(passages) == 3
    titles = [p.find_element("css selector", ".title").text for p in passages]
    assert all(titles)
    markers[0].click()
    assert "focus" in blocks[0].get_attribute("class")
    shot = artifacts_dir() / "viewer-dragin.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_opens_a_saved_trace_and_a_predictions_file(browser, served, demo_question, tmp_path):
    from selenium.webdriver.support.ui import Select

    body = {"question": demo_question.question, "method": "flare", "options": {"theta": 0.9, "max_new_tokens": 40}}
    trace = httpx.post(f"{served.v1}/ask", json=body, headers=served.headers(), timeout=HANG_GUARD_S).json()
    saved = tmp_path / "trace.json"
    saved.write_text(json.dumps(trace, indent=2))
    browser.get(served.root + "/")
    browser.find_element("id", "file").send_keys(str(saved))
    wait_for(browser, lambda d: d.find_element("id", "q-text").text == demo_question.question, 30)
    assert browser.find_element("id", "final-answer").text == (trace["final_answer"] or "(no answer)")
    assert len(shaded(browser)) >= 1  # flare: 1 - token probability
    assert len(browser.find_elements("css selector", ".retrieval-marker")) == len(trace["retrievals"]) >= 1

    example = QAExample(id="q-demo", question=demo_question.question, answers=list(demo_question.answers))
    other = QAExample(id="q-other", question="Where is the other place?", answers=["Nowhere"])
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps(make_record(example, trace, 1.5, False)) + "\n"
                           + json.dumps(make_record(other, {**trace, "question": other.question}, 2.0, False)) + "\n")
    browser.find_element("id", "file").send_keys(str(predictions))
    records = Select(browser.find_element("id", "records"))
    wait_for(browser, lambda d: len(records.options) == 2, 30)
    assert "q-demo" in records.options[0].text and "EM" in records.options[0].text
    assert "gold: " + demo_question.answers[0] in browser.find_element("id", "gold").text
    queries = browser.find_elements("css selector", "#retrievals .query")
    assert [q.text for q in queries] == [r["query"] for r in trace["retrievals"]]
    records.select_by_index(1)
    wait_for(browser, lambda d: d.find_element("id", "q-text").text == other.question, 30)
    browser.save_screenshot(str(artifacts_dir() / "viewer-predictions.png"))


def test_shades_an_etc_trace_by_its_trend_score_and_marks_the_cut(browser, served, tmp_path):
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.methods.registry import build_method
    from tests.methods.sentence_lm import NamedPassages, SentenceLM
    from tests.methods.test_etc import QUESTION, RISING

    lm = SentenceLM([RISING, " Lyon. So the answer is Alpha."])
    method = build_method("etc", lm, NamedPassages({}, default=["p1"]), {}, PromptBuilder.for_dataset("default", 1))
    saved = tmp_path / "etc.json"
    saved.write_text(json.dumps(method.answer(QUESTION).to_dict()))
    browser.get(served.root + "/")
    browser.find_element("id", "file").send_keys(str(saved))
    wait_for(browser, lambda d: d.find_element("id", "q-text").text == QUESTION, 30)
    assert [w.text for w in shaded(browser)] == ["Lyon."]  # the one word over theta
    assert len(browser.find_elements("css selector", ".retrieval-marker")) == 1
    # the cut: "Lyon." and the word after it, decoded and thrown away
    assert [w.text for w in browser.find_elements("css selector", "#answer-text .w.struck")] == ["Lyon.", "Then"]
