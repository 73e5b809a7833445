"""``elmo serve``: ELMo vectors over HTTP with dynamic batching, limits, metrics and a sense page.

``elmo.serve.app.create_app`` builds the app; ``elmo.serve.commands`` is the command line. This module
imports nothing, so registering the command does not load the web stack.
"""
