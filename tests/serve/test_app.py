"""``create_app``, the library's entry to the service: what it refuses to build."""

import pytest

from elmo.embedder import Embedder
from elmo.serve.app import create_app
from elmo.serve.config import ServeConfig


@pytest.mark.parametrize(("config", "named"), [
    (ServeConfig(max_sentence_tokens=8, window_context=2), ("max_window_tokens=12", "max_sentence_tokens is 8")),
    (ServeConfig(max_sentence_tokens=16), ("max_window_tokens=12", "max_sentence_tokens is 16")),
    (ServeConfig(max_sentence_tokens=12, window_context=2), ("window_context=3", "window_context is 2")),
])
def test_an_embedder_windowed_otherwise_than_the_config_is_refused_naming_it_and_both_settings(
        embedder: Embedder, config: ServeConfig, named: tuple[str, str]) -> None:
    """/v1/models reports the config's windows as those in force, so a model that cuts long sentences otherwise
    (the ``embedder`` fixture: 12-token windows, 3 of context) must not be served under them."""
    fits = Embedder(embedder.bilm, max_window_tokens=config.max_sentence_tokens, window_context=config.context_tokens)
    with pytest.raises(ValueError) as refused:
        create_app({"fits": fits, "en": embedder}, config)
    message = str(refused.value)
    assert "'en'" in message and "'fits'" not in message
    assert all(part in message for part in named), message
