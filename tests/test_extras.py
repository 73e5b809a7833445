"""The lean install: the core embeds with no extra installed, and a feature without its extra says in one line
which extra to install, before it starts any work.

"Not installed" is made real in a fresh Python: ``sys.modules[name] = None`` makes ``import name`` raise
ImportError and ``importlib.util.find_spec(name)`` find nothing, as where the package is absent.
"""

import pickle
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from elmo.extras import EXTRAS, MissingExtra, missing_modules, require

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DIR = Path(__file__).parent / "fixtures" / "elmo"
EVERY_EXTRA_MODULE = sorted({module for modules in EXTRAS.values() for module in modules})


def python(code: str, blocked: list[str] | tuple[str, ...], *, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter in which the ``blocked`` modules are not installed."""
    prelude = f"import sys\nsys.modules.update(dict.fromkeys({list(blocked)!r}))\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def elmo(argv: list[str], blocked: list[str] | tuple[str, ...], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``elmo ARGV`` with the ``blocked`` modules not installed."""
    return python(f"from elmo.cli import main\nsys.exit(main({argv!r}))", blocked, cwd=cwd)


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


# --- the table in elmo.extras and pyproject.toml agree -----------------------------------------------------------

@pytest.mark.parametrize("extra", [name for name in EXTRAS if name != "ray"])
def test_each_extra_in_pyproject_provides_exactly_the_modules_elmo_extras_checks(extra):
    declared = {_name(requirement) for requirement in _pyproject()["project"]["optional-dependencies"][extra]}
    installed = packages_distributions()
    providers = {module: {_name(dist) for dist in installed.get(module, [])} for module in EXTRAS[extra]}
    not_installed = [module for module, dists in providers.items() if not dists]
    if not_installed:
        pytest.skip(f"not installed here: {not_installed}")
    assert all(dists & declared for dists in providers.values()), (extra, providers, declared)
    provided = set().union(*providers.values())
    assert declared <= provided, f"{extra}: {declared - provided} declared but no module of it is checked"


def test_the_core_dependencies_hold_no_extras_package():
    project = _pyproject()["project"]
    core = {_name(requirement) for requirement in project["dependencies"]}
    assert core == {"torch", "numpy", "h5py", "tqdm", "sacremoses", "jieba"}
    for extra, requirements in project["optional-dependencies"].items():
        if extra not in ("all", "dev"):
            assert not core & {_name(requirement) for requirement in requirements}, extra


def test_all_is_every_extra_but_ray_and_dev_installs_all():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert set(extras) == {*EXTRAS, "all", "dev"}
    (everything,) = extras["all"]
    assert set(re.fullmatch(r"elmo-bilm\[(.*)\]", everything).group(1).split(",")) == set(EXTRAS) - {"ray"}
    assert "elmo-bilm[all]" in extras["dev"]


# --- require ------------------------------------------------------------------------------------------------------

def test_require_names_the_extra_the_install_command_and_the_missing_modules(monkeypatch):
    if missing_modules("serve"):
        pytest.skip("the serve extra is not installed here")
    require("serve", "elmo serve")  # everything there: no error
    monkeypatch.setitem(sys.modules, "orjson", None)
    monkeypatch.setitem(sys.modules, "scipy", None)
    with pytest.raises(MissingExtra) as raised:
        require("serve", "elmo serve")
    assert str(raised.value) == ("elmo serve needs the 'serve' extra: pip install 'elmo-bilm[serve]' "
                                 "(missing: orjson, scipy)")
    assert raised.value.missing == ("orjson", "scipy") and raised.value.extra == "serve"
    assert isinstance(raised.value, ImportError)  # callers that catch ImportError still do


def test_an_unknown_extra_is_a_programming_error():
    with pytest.raises(KeyError, match="no extra 'serving'"):
        require("serving", "elmo serve")


# --- the core alone -----------------------------------------------------------------------------------------------

def test_embedding_to_hdf5_and_npy_and_info_need_no_extra(tmp_path):
    (tmp_path / "in.txt").write_text("The bank of the river .\nShe sat down .\n", encoding="utf-8")
    result = python(f"""
        from elmo import Embedder
        from elmo.cli import main

        vectors = Embedder.load({str(FIXTURE_DIR)!r}).encode(["a b c", "d e"], pooling="mean")
        assert vectors.shape[0] == 2, vectors.shape
        codes = [main(["embed", "in.txt", "out.hdf5", "--model", {str(FIXTURE_DIR)!r}, "--quiet"]),
                 main(["embed", "in.txt", "out.npy", "--pooling", "mean", "--model", {str(FIXTURE_DIR)!r},
                       "--quiet"]),
                 main(["info", {str(FIXTURE_DIR)!r}]),
                 main(["vocab", "in.txt", "--out", "vocab.txt"])]
        print("codes", codes)
        print("extras imported", [name for name, module in sys.modules.items() if module is not None
                                  and name.split(".")[0] in {EVERY_EXTRA_MODULE!r}])
    """, EVERY_EXTRA_MODULE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "codes [0, 0, 0, 0]" in result.stdout and "extras imported []" in result.stdout
    assert {path.name for path in tmp_path.iterdir()} >= {"out.hdf5", "out.npy", "vocab.txt"}


def test_the_demo_needs_only_the_demo_extra(tmp_path):
    blocked = [module for module in EVERY_EXTRA_MODULE if module not in EXTRAS["demo"]]
    result = elmo(["demo", "--model", str(FIXTURE_DIR), "--out", "demo.png"], blocked, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- a missing extra on the command line: one line, exit 2, nothing done ------------------------------------------

@pytest.mark.parametrize(("argv", "blocked", "extra", "missing"), [
    (["serve", "--model", "en"], ["fastapi"], "serve", "fastapi"),
    (["index", "corpus.txt", "--out", "index"], ["faiss"], "search", "faiss"),
    (["neighbors", "--index", "index", "--sentence", "a bank", "--word", "bank"], ["sklearn", "pyarrow"], "search",
     "sklearn, pyarrow"),
    (["senses", "bank", "--index", "index", "--out", "senses.png"], ["matplotlib"], "search", "matplotlib"),
    (["task", "train", "tagger", "--train", "a", "--dev", "b", "--test", "c", "--model", "en", "--out", "task"],
     ["torchcrf"], "tasks", "torchcrf"),
    (["task", "predict", "task", "--input", "a"], ["seqeval"], "tasks", "seqeval"),
    (["train", "--corpus", "corpus.txt", "--out", "run"], ["safetensors"], "train", "safetensors"),
    (["perplexity", "--model", "en", "--corpus", "corpus.txt"], ["matplotlib"], "train", "matplotlib"),
    (["export", "run", "--out", "model"], ["safetensors"], "train", "safetensors"),
    (["demo", "--out", "demo.png"], ["matplotlib"], "demo", "matplotlib"),
    (["export-onnx", "en", "--out", "en.onnx"], ["onnxscript"], "onnx", "onnxscript"),
])
def test_a_command_without_its_extra_says_in_one_line_which_to_install(tmp_path, argv, blocked, extra, missing):
    (tmp_path / "corpus.txt").write_text("a bank of a river\n", encoding="utf-8")
    result = elmo(argv, blocked, cwd=tmp_path)
    command = argv[0]
    assert result.returncode == 2
    assert result.stderr == (f"elmo {command} needs the '{extra}' extra: pip install 'elmo-bilm[{extra}]' "
                             f"(missing: {missing})\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt"]  # no work started


def test_python_m_elmo_serve_checks_the_extra_too():
    result = python("from elmo.serve.commands import main\nsys.exit(main(['--model', 'en']))", ["uvicorn"])
    assert result.returncode == 2
    assert result.stderr == "elmo serve needs the 'serve' extra: pip install 'elmo-bilm[serve]' (missing: uvicorn)\n"


def test_serving_an_index_without_the_search_extra_is_refused_before_any_model_loads():
    result = elmo(["serve", "--model", "en", "--index", "no/such/index"], ["faiss"])
    assert result.returncode == 2
    assert result.stderr == ("elmo serve: error: --index needs the 'search' extra: pip install 'elmo-bilm[search]' "
                             "(missing: faiss)\n")


def test_parquet_output_without_pyarrow_is_refused_before_the_model_loads(tmp_path):
    (tmp_path / "in.txt").write_text("a b c\n", encoding="utf-8")
    result = elmo(["embed", "in.txt", "out.parquet", "--model", str(FIXTURE_DIR), "--quiet"], ["pyarrow"],
                  cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("elmo embed: error: Parquet output needs the 'parquet' extra: "
                             "pip install 'elmo-bilm[parquet]' (missing: pyarrow)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


# --- a missing extra in Python: MissingExtra at the entry point, before any work ----------------------------------

@pytest.mark.parametrize(("statement", "blocked", "feature", "extra"), [
    ("from elmo.serve import create_app", ["fastapi"], "elmo.serve.create_app", "serve"),
    ("from elmo.search import build_index", ["faiss"], "elmo.search.build_index", "search"),
    ("from elmo.tasks import fit", ["torchcrf"], "elmo.tasks.fit", "tasks"),
    ("from elmo.training import train", ["matplotlib"], "elmo.training.train", "train"),
])
def test_a_package_names_its_extra_when_a_name_is_first_used(statement, blocked, feature, extra):
    result = python(f"""
        from elmo.extras import MissingExtra
        try:
            {statement}
        except MissingExtra as error:
            print(error)
    """, blocked)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{feature} needs the '{extra}' extra: pip install 'elmo-bilm[{extra}]' (missing: ")


def test_build_index_and_train_check_their_extra_before_any_work(tmp_path):
    (tmp_path / "corpus.txt").write_text("a bank of a river\n", encoding="utf-8")
    result = python(f"""
        from elmo.extras import MissingExtra
        from elmo.search.build import build_index
        from elmo.training.trainer import TrainingOptions, train

        for call in (lambda: build_index("corpus.txt", "index", {str(FIXTURE_DIR)!r}),
                     lambda: train(TrainingOptions(corpus=["corpus.txt"]), "run")):
            try:
                call()
            except MissingExtra as error:
                print(error)
    """, ["faiss", "matplotlib"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "elmo.search.build_index needs the 'search' extra: pip install 'elmo-bilm[search]' "
        "(missing: faiss, matplotlib)",
        "elmo.training.train needs the 'train' extra: pip install 'elmo-bilm[train]' (missing: matplotlib)",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt"]


def test_missing_extra_survives_a_pickle_round_trip_as_a_worker_process_sends_it():
    error = MissingExtra("elmo.search.build_index", "search", ["faiss", "sklearn"])
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is MissingExtra
    assert (copy.feature, copy.extra, copy.missing) == ("elmo.search.build_index", "search", ("faiss", "sklearn"))
    assert str(copy) == (
        "elmo.search.build_index needs the 'search' extra: pip install 'elmo-bilm[search]' (missing: faiss, sklearn)"
    )
