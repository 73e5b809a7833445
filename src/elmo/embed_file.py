"""Where ``elmo embed``'s file handling used to live; it is now ``elmo.embed_job``. These names stay
importable from here for the modules that read text files the same way (``elmo.search``, ``elmo.allennlp``)."""

from elmo.embed_job.job import check_output_path, embed_file
from elmo.embed_job.source import EmbedReport, TextFile, check_text_file, read_lines

__all__ = ["EmbedReport", "TextFile", "check_output_path", "check_text_file", "embed_file", "read_lines"]
