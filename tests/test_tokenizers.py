"""The English tokenizer: Moses on raw text, and text tokenized already left as it is; and the cleaning every reader
does before any tokenizer."""

import subprocess
import sys

import pytest
from sacremoses import MosesTokenizer

from elmo.tokenizers import clean_text, english_tokenize, get_tokenizer, jieba_tokenize, word_key

# Lines of the shipped en model's train.txt (Brown and Wikipedia leads, tokenized by Moses), as `elmo index`
# reads them back.
TOKENIZED_LINES = """\
" My , you 're peaked .
There was Wright 's , for one , lost amongst trees , its wide verandas strewn with rockers .
I 've tried to teach some of the other boys to kick and some of them can 't seem to get the feel .
I want you to find Monsieur Prieur at once and give him this money for the boy 's purchase .
And he would sleep , sleep , and never think of roads and horses ' sore haunches , of colonial wars .
You 'll get your pay in the morning " .
Out came the journal and in it went Ann 's own description of the scene :
The lad 's once superb body was a mass of scars and welts .
I 'm not steering you wrong .
Then if you change jobs you won 't necessarily have to sell the farm .
" I imagine you 're always battling in school " .
The ship 's compass was useless because of the nearness of the magnetic North Pole .
Finland 's climate varies from humid continental in the south to boreal in the north .
He reported that the city 's contributions for animal care included $ 67,000 to the Women 's S.P.C.A. ; ;
Not all of Palfrey 's slaves were aboard the Bashaw .
Their name derives from the Latin cumulus , meaning " heap " or " pile " .
And put Cate 's gun back " .
Edwards is widely regarded as one of America 's most important and original philosophical theologians .
He asked , " Could we have a drink " ? ?
one with blood all over it , Arbuckle 's blood " .
He approached the horse and laid a hand on the stallion 's quivering neck .
I heard her murmur , " We 'd better lock the door " .
Don 't urge your builder to give you a little extra cooling capacity just to be sure you have enough .
You can work on this one while I 'm gone , kill it if you want " .
This phenomenon is known as Oersted 's law .
Mankowski , the ball-hawking defensive expert , was cited for his performance against Bradley in St. Louis U. ' s \
nationally televised victory .
The screenplay is adapted from Thomas Dixon Jr . ' s 1905 novel and play The Clansman : A Historical Romance of \
the Ku Klux Klan .
His first short story , " Blackmailers Don 't Shoot " , was published in 1933 in Black Mask , a pulp magazine .
I didn 't smell a drop of liquor , and we didn 't have a bit of trouble " .
Chico Ruiz made a spectacular play on Alusik 's grounder in the hole in the fourth .
""".splitlines()

RAW_SENTENCES = [
    "Don't stop, Mr. Smith.",
    "The boy's dog wasn't there; they'd gone home at 5 p.m.",
    "She said 'no way' and left.",
    "Rock 'n' roll: it's 1960's music (mostly).",
    "The boys' toys cost $5,300... and they're broken!",
    "'Tis the season, isn't it?",
]


@pytest.mark.parametrize("line", TOKENIZED_LINES)
def test_tokenized_corpus_lines_come_back_unchanged(line: str) -> None:
    assert english_tokenize(line) == line.split()


@pytest.mark.parametrize(("text", "tokens"), [
    ("Alusik 's", ["Alusik", "'s"]),
    ("do n't", ["do", "n't"]),
    ("DO N'T", ["DO", "N'T"]),
    ("we 're here , I 'm told , you 've been , he 'd go , they 'll see", [
        "we", "'re", "here", ",", "I", "'m", "told", ",", "you", "'ve", "been", ",", "he", "'d", "go", ",", "they",
        "'ll", "see"]),
    ("elmoclitic 's elmoclitic", ["elmoclitic", "'s", "elmoclitic"]),  # the text holding our stand-in word
])
def test_ptb_clitics_standing_alone_are_kept(text: str, tokens: list[str]) -> None:
    assert english_tokenize(text) == tokens


@pytest.mark.parametrize("text", RAW_SENTENCES)
def test_raw_text_is_split_by_the_moses_rules_as_before(text: str) -> None:
    assert english_tokenize(text) == MosesTokenizer(lang="en").tokenize(text, escape=False)


@pytest.mark.parametrize("text", RAW_SENTENCES)
def test_tokenizing_twice_gives_what_tokenizing_once_gives(text: str) -> None:
    once = english_tokenize(text)
    assert english_tokenize(" ".join(once)) == once


def test_raw_contractions_split_as_the_shipped_corpus_has_them() -> None:
    """Moses splits ``don't`` as ``don 't`` (not PTB's ``do n't``); the en corpus was tokenized so."""
    assert english_tokenize("don't") == ["don", "'t"]
    assert english_tokenize("Alusik's grounder") == ["Alusik", "'s", "grounder"]


def test_an_unknown_tokenizer_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown tokenizer 'moses'; expected one of"):
        get_tokenizer("moses")


# Characters that steer only how text is drawn: each made a token of its own or split the word it sat in.
INVISIBLE = {
    "soft hyphen": "\u00ad",
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "left-to-right mark": "\u200e",
    "Arabic letter mark": "\u061c",
    "Mongolian vowel separator": "\u180e",
    "nominal digit shapes": "\u206f",
    "right-to-left isolate": "\u2067",
    "word joiner": "\u2060",
    "byte-order mark": "\ufeff",
    "variation selector-16 (emoji style)": "\ufe0f",
    "variation selector-17": "\U000e0100",
    "Mongolian free variation selector": "\u180b",
    "combining grapheme joiner": "\u034f",
    "tag letter": "\U000e0065",
}


def test_an_emoji_with_its_style_selector_is_one_token_findable_as_typed() -> None:
    tokens = english_tokenize(clean_text("I \u2764\ufe0f NY"))  # red heart, emoji style: a token of its own before
    assert tokens == ["I", "\u2764", "NY"]
    assert word_key("\u2764\ufe0f") == tokens[1]


@pytest.mark.parametrize(("text", "tokens"), [
    ("The DOTMULTI constant", ["The", "DOTMULTI", "constant"]),  # was ["The", ".", "constant"]
    ("see DOTDOTMULTI here", ["see", "DOTDOTMULTI", "here"]),
    ("xDOTMULTIy and QELMODOTS", ["xDOTMULTIy", "and", "QELMODOTS"]),  # the text holding our stand-in word
    ("wait... DOTMULTI.. ok", ["wait", "...", "DOTMULTI", "..", "ok"]),
    ("Alusik 's DOTMULTI", ["Alusik", "'s", "DOTMULTI"]),
])
def test_words_sacremoses_uses_as_dot_stand_ins_come_back_as_written(text: str, tokens: list[str]) -> None:
    assert english_tokenize(text) == tokens


@pytest.mark.parametrize("character", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_invisible_formatting_inside_a_word_is_deleted_so_the_word_stays_whole(character: str) -> None:
    text = clean_text(f"International co{character}operation matters .")
    assert english_tokenize(text) == ["International", "cooperation", "matters", "."]
    assert jieba_tokenize(clean_text(f"{character}\u4e2d\u6587")) == ["\u4e2d\u6587"]  # 中文


def test_a_zero_width_space_joins_rather_than_splits_latin_words() -> None:
    assert english_tokenize(clean_text("Wi\u200bFi works")) == ["WiFi", "works"]


def test_the_zero_width_non_joiner_persian_spelling_needs_is_kept() -> None:
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # mi-khaham, "I want": one word, drawn apart
    assert clean_text(persian) == persian


def test_decomposed_text_is_composed_so_it_tokenizes_as_typed_text_does() -> None:
    decomposed = "The cafe\u0301 is nai\u0308ve ."  # e + combining acute, i + combining diaeresis
    assert clean_text(decomposed) == "The caf\u00e9 is na\u00efve ."
    assert english_tokenize(clean_text(decomposed)) == ["The", "caf\u00e9", "is", "na\u00efve", "."]


def test_a_mark_that_a_deleted_character_kept_apart_from_its_letter_is_composed_with_it() -> None:
    assert clean_text("cafe\u200b\u0301 .") == "caf\u00e9 ."  # deleted first, then composed


def test_control_characters_still_read_as_spaces() -> None:
    assert clean_text("\ufeffThe bank\x01closed\x7fearly .") == "The bank closed early ."


def test_a_callers_jieba_dictionary_does_not_change_how_jieba_tokenize_splits():
    # In a process of its own: the word added to jieba's shared dictionary would stay for the other tests.
    script = (
        "import jieba\n"
        "from elmo.tokenizers import jieba_tokenize\n"
        "word = '大学生活动中心'\n"
        "before = jieba_tokenize(word)\n"
        "jieba.add_word(word)\n"
        "print(before == jieba_tokenize(word), jieba.lcut(word) == [word], len(before))\n"
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert finished.stdout.split() == ["True", "True", "2"], finished.stderr
