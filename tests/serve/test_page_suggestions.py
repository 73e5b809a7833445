"""The sense page's word suggestions (``app.js``, ``showCandidates``) run in Node with the few browser objects the
script touches stubbed, so which repeated tokens it offers is checked where no browser is installed."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
APP_JS = Path(__file__).parents[2] / "src" / "elmo" / "serve" / "static" / "app.js"

# Loads app.js with a stub DOM and a fetch that answers /v1/tokenize with the tokens given; app.js asks for the
# suggestions as it starts, and the words of the chips it draws are printed once its promises have run.
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [appJs, tokensJson] = process.argv.slice(1);
const element = () => ({value: "", textContent: "", dataset: {}, style: {}, children: [],
  replaceChildren(...children) { this.children = children; }, append(...children) { this.children.push(...children); },
  addEventListener() {}});
const elements = {};
const document = {getElementById: (id) => (elements[id] ??= element()), createElement: element, body: element()};
const fetch = async (url) => url === "/v1/tokenize" ? {ok: true, json: async () => ({tokens: JSON.parse(tokensJson)})}
                                                      : {ok: false, status: 401};
const context = vm.createContext({document, fetch, setTimeout, clearTimeout, Option: class {}});
vm.runInContext(fs.readFileSync(appJs, "utf8"), context);
setTimeout(() => console.log(JSON.stringify(elements.candidates.children.map((chip) => chip.textContent))), 100);
"""


def suggested(token_lists: list[list[str]]) -> list[str]:
    shown = subprocess.run([NODE, "-e", HARNESS, str(APP_JS), json.dumps(token_lists)], capture_output=True, text=True,
                           timeout=60, check=True)
    return json.loads(shown.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_every_repeated_word_is_suggested_however_short_but_no_punctuation_nor_short_ascii() -> None:
    # Chinese words of one and two characters (我, 小米), an English word in two cases, an English function word
    # (a) and punctuation repeated.
    token_lists = [["我", "喜欢", "吃", "小米", "粥", "。"], ["小米", "手机", "很", "好", "用", "。"],
                   ["我", "买", "了", "小米"], ["the", "bank", "of", "a", "river", ","], ["a", "Bank", ",", "2024"]]
    assert suggested(token_lists) == ["我", "小米", "bank"]
