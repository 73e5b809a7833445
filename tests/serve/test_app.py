"""``create_app``, the library's entry to the service: what it refuses to build."""

import threading
import time

import httpx
import pytest
import uvicorn

from elmo.embedder import Embedder
from elmo.serve.app import create_app
from elmo.serve.config import ServeConfig

from .conftest import free_port


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


def test_a_failure_of_the_model_is_answered_as_a_json_500_and_the_service_goes_on(embedder: Embedder) -> None:
    """Starlette answered an error nothing handled (the model out of memory, say) as a plain-text 500, outside the
    one error shape the docs promise for every error the service writes."""
    def out_of_memory(*_args, **_kwargs):
        raise RuntimeError("out of memory")

    failing = Embedder(embedder.bilm, max_window_tokens=12, window_context=3)
    failing.embed = out_of_memory  # type: ignore[method-assign]
    config = ServeConfig(max_sentence_tokens=12, window_context=3)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app({"en": failing}, config), host="127.0.0.1", port=port,
                                           log_level="critical"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        answer = httpx.post(f"{url}/v1/embed", json={"sentences": ["the bank"]}, timeout=60)
        assert answer.status_code == 500 and answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["code"] == "internal_error" and "RuntimeError" in error["message"], error
        assert "out of memory" not in error["message"]  # the log has it; the client learns no internals
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        assert httpx.head(f"{url}/healthz", timeout=10).status_code == 200  # some health checkers send HEAD (405)
    finally:
        server.should_exit = True
        thread.join()
