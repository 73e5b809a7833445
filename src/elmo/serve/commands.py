"""``elmo serve``: parse the flags, load the models, run uvicorn.

``add_subcommands`` registers ``serve`` on the ``elmo`` command's subparsers; ``python -m elmo.serve``
runs the same command on its own. Bad flags print a one-line error and exit 2 before any model loads, and so
does a missing ``serve`` extra (``search`` too with ``--index``).
"""

import argparse
import socket
import sys

from elmo.command_line import (
    MAX_THREADS,
    device,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    thread_count,
)
from elmo.extras import require
from elmo.serve.config import IndexSpec, ModelSpec, ServeConfig, is_loopback, read_api_keys

DEFAULTS = ServeConfig()


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535, checked before any model loads."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1 to 65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1 to 65535)")
    return port


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser(
        "serve", help="serve embeddings over HTTP (dynamic batching, limits, metrics, a sense page at /)",
        description="Serve ELMo vectors over HTTP. Stateless: run N replicas behind any load balancer.")
    serve.add_argument("--model", action="append", required=True, metavar="[NAME=]MODEL", dest="models",
                       help="a model directory or shipped model name, repeatable; served under NAME, else under "
                            "the directory's name (en=path/to/dir serves path/to/dir as 'en'; a path that exists, "
                            "or has a '/' before its first '=', is a bare path)")
    serve.add_argument("--index", action="append", default=[], metavar="[NAME=]DIR", dest="indexes",
                       help="a contextual-search index from `elmo index`, repeatable, for /v1/neighbors and "
                            "/v1/senses; served under NAME, else under the directory's name (read as --model "
                            "is). The model it was built with must be served too (--model)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=port_number, default=8000, help="TCP port to listen on")
    serve.add_argument("--device", type=device, default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    serve.add_argument("--threads", type=thread_count, default=None,
                       help=f"torch (and faiss) CPU threads, at most {MAX_THREADS:,} (default: their choice)")
    serve.add_argument("--api-key-file", help="require 'Authorization: Bearer KEY' on /v1/ and /metrics; "
                                              "one key per line. Required off loopback unless --no-auth")
    serve.add_argument("--no-auth", action="store_true", help="serve a non-loopback address without a key")
    limits = serve.add_argument_group("limits")
    limits.add_argument("--max-body-bytes", type=positive_int, default=DEFAULTS.max_body_bytes,
                        help="largest request body read (413 beyond)")
    limits.add_argument("--max-sentences", type=positive_int, default=DEFAULTS.max_sentences, help="per request")
    limits.add_argument("--max-sentence-tokens", type=positive_int, default=None,
                        help="longer sentences are cut into overlapping windows of this many tokens, or refused "
                             f"(default: {DEFAULTS.max_sentence_tokens})")
    limits.add_argument("--long-sentences", choices=("window", "refuse"), default=DEFAULTS.long_sentences,
                        help="a sentence over --max-sentence-tokens: embedded in overlapping windows, or refused")
    limits.add_argument("--window-context", type=non_negative_int, default=None,
                        help="context tokens on each side of a window (default: a quarter of the window)")
    limits.add_argument("--max-request-tokens", type=positive_int, default=DEFAULTS.max_request_tokens,
                        help="tokens per request, all sentences together (a windowed long sentence too); "
                             "more is answered 413")
    limits.add_argument("--max-queue", type=positive_int, default=DEFAULTS.max_queue,
                        help="requests held per model before answering 503 with Retry-After")
    limits.add_argument("--max-queue-tokens", type=positive_int, default=DEFAULTS.max_queue_tokens,
                        help="tokens held per model, from admission to the last byte of the answer, before "
                             "answering 503 with Retry-After: bounds the memory of vectors and answers")
    limits.add_argument("--request-timeout", type=positive_float, default=DEFAULTS.request_timeout_s,
                        help="seconds before a request is answered 504")
    limits.add_argument("--limit-concurrency", type=positive_int, default=DEFAULTS.limit_concurrency,
                        help="open connections; past it uvicorn answers 503")
    limits.add_argument("--header-timeout", type=positive_float, default=DEFAULTS.header_timeout_s,
                        help="seconds for a request's head to arrive; past it the connection is closed (408)")
    limits.add_argument("--body-timeout", type=positive_float, default=DEFAULTS.body_timeout_s,
                        help="seconds from a request's head to the end of its body; past it 408, connection closed")
    limits.add_argument("--write-timeout", type=positive_float, default=DEFAULTS.write_timeout_s,
                        help="seconds a client may take none of its answer before the connection is aborted")
    limits.add_argument("--keep-alive-timeout", type=positive_int, default=DEFAULTS.keep_alive_s,
                        help="seconds an idle keep-alive connection stays open")
    batching = serve.add_argument_group("batching")
    batching.add_argument("--max-batch-tokens", type=positive_int, default=DEFAULTS.max_batch_tokens,
                          help="tokens merged into one model batch")
    batching.add_argument("--max-wait-ms", type=non_negative_float, default=DEFAULTS.max_wait_ms,
                          help="how long a request waits for others to join its batch")
    batching.add_argument("--batch-size", type=positive_int, default=DEFAULTS.batch_size,
                          help="rows per biLM forward pass within a batch")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                       help="uvicorn's log level")
    serve.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=None,
                       help="log one line per request, at the info level (default: on at --log-level info and "
                            "debug)")
    serve.set_defaults(func=serve_command, extra="serve")


def serve_command(args: argparse.Namespace) -> int:
    if args.indexes:
        require("search", "--index")
    try:
        specs = [ModelSpec.parse(value) for value in args.models]
        _check_unique_names("--model", [spec.name for spec in specs])
        _check_model_directories(specs)
        index_specs = [IndexSpec.parse(value) for value in args.indexes]
        _check_unique_names("--index", [spec.name for spec in index_specs])
        if args.no_auth and args.api_key_file:
            raise ValueError("--no-auth and --api-key-file contradict each other")
        if args.long_sentences == "refuse" and args.window_context is not None:
            raise ValueError("--window-context sets the windows long sentences are cut into; --long-sentences refuse "
                             "cuts none: leave it out")
        if args.max_sentence_tokens is not None and args.max_sentence_tokens > args.max_request_tokens:
            raise ValueError(f"--max-sentence-tokens {args.max_sentence_tokens} is more than --max-request-tokens "
                             f"{args.max_request_tokens}: a sentence that long is answered 413 before any window "
                             "applies; give at most --max-request-tokens")
        if args.access_log and args.log_level in ("warning", "error", "critical"):
            raise ValueError(f"--access-log writes at the info level, which --log-level {args.log_level} hides: give "
                             "--log-level info or debug, or leave --access-log out")
        if not is_loopback(args.host) and not args.api_key_file and not args.no_auth:
            raise ValueError(f"--host {args.host} is reachable from other machines: give --api-key-file, "
                             "or --no-auth to serve it without authentication on purpose")
        config = ServeConfig(
            max_body_bytes=args.max_body_bytes, max_sentences=args.max_sentences,
            max_sentence_tokens=DEFAULTS.max_sentence_tokens if args.max_sentence_tokens is None
            else args.max_sentence_tokens, long_sentences=args.long_sentences,
            window_context=args.window_context, max_request_tokens=args.max_request_tokens,
            max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
            max_queue_tokens=args.max_queue_tokens, request_timeout_s=args.request_timeout,
            limit_concurrency=args.limit_concurrency, header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout, write_timeout_s=args.write_timeout, keep_alive_s=args.keep_alive_timeout,
            batch_size=args.batch_size, api_keys=read_api_keys(args.api_key_file) if args.api_key_file else ())
        indexes = _index_models(index_specs, specs, config)
        _check_can_listen(args.host, args.port)
        return _run(args, specs, config, indexes)
    except (FileNotFoundError, ValueError) as error:
        print(f"elmo serve: error: {error}", file=sys.stderr)
        return 2


def _check_model_directories(specs: list[ModelSpec]) -> None:
    """Every --model names a model directory (its files, not its weights, are read): a bad second one was
    found only after the first had loaded."""
    from elmo.model_dir import ModelDir

    for spec in specs:
        ModelDir.find(spec.source)


def _check_unique_names(flag: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise ValueError(f"two {flag} flags serve the same name ({', '.join(names)}); name them NAME=DIR")


def _check_can_listen(host: str, port: int) -> None:
    """ValueError, before any model loads, when ``host:port`` cannot be listened on (a port in use, an address of
    no interface here): uvicorn found it only after every model had loaded, and exited without naming a flag. A
    trial socket, closed at once, made as uvicorn makes its own (IPv6 for a host with a colon, else IPv4;
    SO_REUSEADDR, which a listening socket still refuses)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as trial:
            trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            trial.bind((host, port))
    except OSError as error:
        raise ValueError(f"--host {host} --port {port}: cannot listen there ({error.strerror or error})") from None


def _index_models(index_specs: list[IndexSpec], specs: list[ModelSpec],
                  config: ServeConfig) -> dict[str, tuple[str, str]]:
    """Each index's directory and the served model that embeds its queries, checked (with its tokenizer and the
    service's windows) before any model loads."""
    if not index_specs:
        return {}
    from elmo.serve.search import model_for_index

    window = {"max_window_tokens": config.max_sentence_tokens, "window_context": config.context_tokens}
    return {spec.name: (str(spec.directory), model_for_index(spec, specs, window)) for spec in index_specs}


def _run(args: argparse.Namespace, specs: list[ModelSpec], config: ServeConfig,
         indexes: dict[str, tuple[str, str]]) -> int:
    import torch
    import uvicorn

    from elmo.embedder import Embedder
    from elmo.serve.app import create_app
    from elmo.serve.guards import GuardedH11Protocol

    if args.threads is not None:
        torch.set_num_threads(args.threads)
        if indexes:
            import faiss

            faiss.omp_set_num_threads(args.threads)
    embedders = {spec.name: Embedder.load(spec.source, device=args.device, max_window_tokens=config.max_sentence_tokens,
                                          window_context=config.context_tokens) for spec in specs}
    for embedder in embedders.values():  # load lazy tokenizer dictionaries and warm torch before /healthz says ok
        embedder.embed(["warm up"], "top")
    app = create_app(embedders, config, indexes)
    # uvicorn stops accepting on SIGTERM/SIGINT and waits for in-flight requests; past this it gives up on them.
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.log_level in ("info", "debug") if args.access_log is None else args.access_log,
                timeout_graceful_shutdown=int(config.request_timeout_s) + 5, timeout_keep_alive=config.keep_alive_s,
                # uvicorn refuses once the open connections, the new one counted, reach its limit: N + 1 serves N
                limit_concurrency=config.limit_concurrency + 1,
                http=GuardedH11Protocol.configured(config.header_timeout_s, config.write_timeout_s))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m elmo.serve [flags]``: the same as ``elmo serve [flags]``, the ``serve`` extra checked alike."""
    from elmo.cli import main as elmo_main

    return elmo_main(["serve", *(sys.argv[1:] if argv is None else argv)])
