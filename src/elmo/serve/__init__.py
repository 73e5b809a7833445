"""``elmo serve``: ELMo vectors over HTTP with dynamic batching, limits, metrics and a sense page.

``create_app`` (``elmo.serve.app``) builds the app; ``elmo.serve.commands`` is the command line. This module
imports nothing until ``create_app`` is first read (which checks the ``serve`` extra), so registering the
command does not load the web stack.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = ["create_app"]

__getattr__, __dir__ = lazy_exports(__name__, {"elmo.serve.app": ("create_app",)}, extra="serve")

if TYPE_CHECKING:
    from elmo.serve.app import create_app
