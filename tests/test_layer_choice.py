"""One layer choice: what ``parse_layers`` reads and refuses, what each choice means for a model, and that the
command line, the Embedder and the service read every choice alike and refuse it with the same message."""

import numpy as np
import pytest

from elmo.cli import build_parser
from elmo.embedder import Embedder
from elmo.layer_choice import LayerChoiceError, layer_weights, parse_layers, stored_layer

ACCEPTED = [
    ("all", "all"), ("top", "top"), (" average ", "average"),
    ("2", 2), ("-1", -1), ("layer2", 2), (0, 0), (np.int64(-3), -3),
    ("0,0.5,0.5", [0.0, 0.5, 0.5]), ("1e-3, 2, -3", [0.001, 2.0, -3.0]), ([0, 1, 0], [0.0, 1.0, 0.0]),
    ((0.25, 0.75), [0.25, 0.75]), (np.array([0.5, 0.5], np.float32), [0.5, 0.5]), (np.array(2), 2),
]
REFUSED_FORM = ["bottom", "", "0.5", "layer-1", "layer", "-", "1,,2", "a,b", "\uff12", "layer\uff12", "\uff11,0,0",
                True, np.bool_(False), None, 1.5, [], ["0", "1"], [True, False], {"top": 1},
                b"top", bytearray(b"all")]  # bytes are a Sequence of ints: b"top" was three mixing weights
NOT_FINITE = ["nan,0,1", "0,inf,0", "1e400,0,0", [float("nan"), 0.0], [1e39, 0.0]]


@pytest.mark.parametrize(("given", "expected"), ACCEPTED, ids=[repr(given) for given, _ in ACCEPTED])
def test_every_form_of_a_choice_is_read(given, expected):
    choice = parse_layers(given)
    assert choice == expected and type(choice) is type(expected)


@pytest.mark.parametrize("given", REFUSED_FORM, ids=repr)
def test_what_is_not_a_choice_is_refused_with_the_one_message(given):
    with pytest.raises(LayerChoiceError) as refused:
        parse_layers(given)
    assert str(refused.value) == (f"layers is {given!r}; expected 'all', 'top', 'average', a layer index or mixing "
                                  "weights (one per layer; as text, comma-separated: 0,0.5,0.5)")


@pytest.mark.parametrize("given", NOT_FINITE, ids=repr)
def test_weights_that_would_make_vectors_nan_or_infinite_are_refused(given):
    with pytest.raises(LayerChoiceError, match=r"mixing weights must be finite float32 numbers$"):
        parse_layers(given)


@pytest.mark.parametrize(("given", "weight"), [([1e-50, 0, 0], "1e-50"), ("0,-1e-46,1", "-1e-46")], ids=repr)
def test_a_nonzero_weight_that_float32_would_make_0_is_refused_naming_it(given, weight):
    # float32's smallest nonzero is about 1.4e-45: 1e-50 becomes 0, and [1e-50, 0, 0] would mix every vector to zeros
    assert np.float32(float(weight)) == 0
    with pytest.raises(LayerChoiceError, match=rf"mixing weight {weight} rounds to 0 in float32"):
        layer_weights(given, 3)


def test_a_weight_as_small_as_float32_holds_is_kept():
    assert layer_weights([1.5e-45, 0, 0], 3)[0] > 0  # float32's smallest nonzero, not rounded away


def test_each_choice_is_its_weights_for_a_model_of_three_layers():
    assert layer_weights("all", 3) is None
    np.testing.assert_array_equal(layer_weights("top", 3), [0, 0, 1])
    np.testing.assert_array_equal(layer_weights(-1, 3), [0, 0, 1])
    np.testing.assert_array_equal(layer_weights("layer0", 3), [1, 0, 0])
    np.testing.assert_allclose(layer_weights("average", 3), [1 / 3] * 3)
    np.testing.assert_array_equal(layer_weights("0.5,0.25,-0.25", 3), [0.5, 0.25, -0.25])
    assert layer_weights([1, 2, 3], 3).dtype == np.float32


@pytest.mark.parametrize(("given", "message"), [
    (3, r"layers is 3; a layer index must be in -3..2 \(the model has 3 layers\)"),
    (-4, r"layers is -4; a layer index must be in -3..2"),
    ("0.5,0.5", r"layers is \[0.5, 0.5\]: 2 mixing weights; the model has 3 layers, one weight each"),
])
def test_a_choice_the_model_cannot_take_says_why(given, message):
    with pytest.raises(LayerChoiceError, match=message):
        layer_weights(given, 3)


def test_search_stores_one_vector_per_token_so_it_takes_an_index_top_or_average():
    assert [stored_layer(given, 3) for given in ("top", -1, "layer1", 0, "-3", "average")] == [2, 2, 1, 0, 0, "average"]
    for given in ("all", [0.2, 0.3, 0.5], "bottom", True, "nan,0,1"):  # the last three are no choice at all: the
        with pytest.raises(LayerChoiceError) as refused:  # message named 'all' and mixing weights, which search refuses
            stored_layer(given, 3)
        assert str(refused.value).endswith("an index keeps one vector per token: expected a layer index, 'top' or "
                                           "'average'")
    with pytest.raises(LayerChoiceError, match=r"must be in -3\.\.2"):
        stored_layer(3, 3)


AGREED = ["all", "top", "average", "1", "-1", "layer2", "0.2,0.3,0.5"]
REFUSED_EVERYWHERE = ["bottom", "\uff12", "nan,0,1", "0.5,0.5", "3"]


def _cli(text: str) -> object:
    """``elmo embed``'s --layers as the real parser reads it, or the message it exits with."""
    parser = build_parser()
    try:
        return parser.parse_args(["embed", "in.txt", "out.hdf5", "--layers", text]).layers
    except SystemExit:
        return None


def _service(value: object) -> object:
    pytest.importorskip("fastapi")
    from pydantic import ValidationError

    from elmo.serve.schemas import EmbedRequest

    try:
        return EmbedRequest.model_validate({"sentences": ["a"], "layers": value}).layers
    except ValidationError as error:
        return error.errors()[0]["msg"].removeprefix("Value error, ")


@pytest.mark.parametrize("text", AGREED + REFUSED_EVERYWHERE)
def test_the_command_line_the_embedder_and_the_service_read_a_choice_alike(text, fixture_bilm, capsys):
    embedder = Embedder(fixture_bilm)
    sentences = [["The", "bank", "of", "the", "river"]]
    try:
        expected = embedder.embed(sentences, text)
    except LayerChoiceError as error:
        message = str(error)
        assert text in REFUSED_EVERYWHERE
        cli = _cli(text)
        refused_later = cli is not None  # the parser reads it; it does not fit the model (plan refuses it)
        if refused_later:
            with pytest.raises(LayerChoiceError) as later:
                layer_weights(cli, embedder.n_layers)
            assert str(later.value) == message
        else:
            assert message in capsys.readouterr().err
        served = _service(text)
        if refused_later:
            with pytest.raises(LayerChoiceError) as later:
                layer_weights(served, embedder.n_layers)
            assert str(later.value) == message
        else:
            assert served == message
        return
    assert text in AGREED
    cli, served = _cli(text), _service(text)
    assert cli == served == parse_layers(text)
    for choice in (cli, served):
        for got, want in zip(embedder.embed(sentences, choice), expected, strict=True):
            np.testing.assert_array_equal(got, want)
