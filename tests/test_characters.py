import re

import numpy as np
import pytest
import torch

from elmo.characters import batch_to_char_ids, token_to_char_ids


def test_word_is_bow_shifted_bytes_eow_then_padding():
    ids = token_to_char_ids("ab")
    assert ids[:5] == [259, ord("a") + 1, ord("b") + 1, 260, 261]
    assert ids[5:] == [261] * 45
    assert len(ids) == 50


def test_sentence_boundary_tokens_use_their_own_symbols():
    assert token_to_char_ids("<S>")[:4] == [259, 257, 260, 261]
    assert token_to_char_ids("</S>")[:4] == [259, 258, 260, 261]


def test_non_ascii_token_is_its_utf8_bytes():
    ids = token_to_char_ids("小")
    assert ids[1:4] == [b + 1 for b in "小".encode()]
    assert ids[4] == 260


def test_long_token_is_cut_to_48_bytes_even_mid_character():
    token = "a" + "米" * 30  # 1 + 90 bytes; byte 48 falls inside a character
    ids = token_to_char_ids(token)
    assert ids[1:49] == [b + 1 for b in token.encode()[:48]]
    assert ids[49] == 260


def test_undecodable_characters_are_dropped():
    assert token_to_char_ids("a\ud800b")[:4] == [259, ord("a") + 1, ord("b") + 1, 260]


def test_batch_pads_with_all_zero_tokens_and_mask_marks_real_tokens():
    char_ids = batch_to_char_ids([["a", "b", "c"], [], ["d"]])
    assert char_ids.shape == (3, 3, 50)
    mask = (char_ids > 0).any(-1)
    assert mask.tolist() == [[True, True, True], [False, False, False], [True, False, False]]
    assert torch.equal(char_ids[2, 0], torch.tensor(token_to_char_ids("d")))


def test_batch_of_strings_is_refused():
    with pytest.raises(TypeError, match="sentence 0 is a string"):
        batch_to_char_ids(["not tokenized"])


def test_iterators_of_sentences_or_tokens_are_refused_by_name_before_any_is_read():
    """A generator gave 'object of type generator has no len()' after the checks had used it up."""
    sentences = (sentence for sentence in [["a"], ["b"]])
    with pytest.raises(TypeError, match="sentences is a generator; expected a list"):
        batch_to_char_ids(sentences)
    assert next(sentences) == ["a"]  # not read
    with pytest.raises(TypeError, match="sentence 1 is a list_iterator; expected a list"):
        batch_to_char_ids([["a"], iter(["b", "c"])])


@pytest.mark.parametrize(("token", "shown"), [(b"ab", "b'ab'"), (None, "None"), (3, "3")])
def test_non_string_token_is_a_type_error_naming_its_sentence_and_position(token, shown):
    with pytest.raises(TypeError, match=rf"sentence 1, token 2 is {re.escape(shown)}; expected a string"):
        batch_to_char_ids([["a"], ["b", "c", token]])


def test_numpy_array_of_tokens_reads_as_the_list_of_those_tokens():
    by_hand = torch.tensor([[token_to_char_ids("ab"), token_to_char_ids("é")], [[0] * 50, [0] * 50]])
    char_ids = batch_to_char_ids([np.array(["ab", "é"]), np.array([], dtype=str)])
    assert torch.equal(char_ids, by_hand)
