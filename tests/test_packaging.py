"""What a user's tools see of the installed package."""

import tomllib
from pathlib import Path

import elmo

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_says_it_is_typed_so_a_users_mypy_reads_its_hints() -> None:
    """Without the PEP 561 marker mypy skips the package ("missing library stubs or py.typed marker") and every
    ``encode`` call is ``Any``: the ``@overload``s that say which calls give a matrix were lost on users."""
    assert Path(elmo.__file__).with_name("py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]
    assert "py.typed" in package_data["elmo"]
