"""The packages' shape: the command line loads no NumPy before it fixes the BLAS thread count,
`--threads` reaches BLAS, the tiers' imports point down (autograd < core < run machinery <
interop < lab < command line), no module imports itself back but the engine with its ops and
its engine-room form, and no two modules share a name."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import autograd
import numpy_transformer
from numpy_transformer.cli.common import BLAS_THREAD_VARIABLES
from run_helpers import needs_two_cores

PACKAGE = Path(numpy_transformer.__file__).parent
ENGINE = Path(autograd.__file__).parent
CLEAN_ENVIRONMENT = {name: value for name, value in os.environ.items()
                     if name not in (*BLAS_THREAD_VARIABLES, "OPENBLAS_THREAD_TIMEOUT")}


def run_python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=CLEAN_ENVIRONMENT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_importing_the_command_line_does_not_import_numpy():
    assert run_python("import sys, numpy_transformer.cli; print('numpy' in sys.modules)") == "False"


@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=needs_two_cores)])
def test_the_threads_flag_sets_the_blas_thread_count(threads):
    """The command runs in a fresh interpreter, then threadpoolctl asks the loaded BLAS library
    how many threads it uses."""
    pytest.importorskip("threadpoolctl")
    code = ("import contextlib, io\n"
            "from numpy_transformer.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['gradcheck', '--threads', '{threads}']) == 0\n"
            "from threadpoolctl import threadpool_info\n"
            "print(sorted({pool['num_threads'] for pool in threadpool_info() if pool['user_api'] == 'blas'}))")
    assert run_python(code) == f"[{threads}]"


@pytest.mark.parametrize("threads, spin", [(1, "None"), (2, "16")])
def test_more_than_one_thread_puts_idle_blas_workers_to_sleep_at_once(threads, spin):
    code = ("import os\n"
            "from numpy_transformer.cli import limit_blas_threads\n"
            f"assert limit_blas_threads({threads})\n"
            "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")
    assert run_python(code) == spin


def test_without_the_flag_blas_runs_one_thread():
    pytest.importorskip("threadpoolctl")
    code = ("import contextlib, io\n"
            "from numpy_transformer.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['gradcheck'])\n"
            "from threadpoolctl import threadpool_info\n"
            "print(sorted({pool['num_threads'] for pool in threadpool_info() if pool['user_api'] == 'blas'}))")
    assert run_python(code) == "[1]"


TIERS = (   # bottom to top: a module may import its own tier and the tiers below it, never above
    ("autograd", ("autograd",)),
    ("core", ("numpy_transformer",)),          # every module of numpy_transformer not named below
    ("run machinery", ("numpy_transformer.data", "numpy_transformer.training")),
    ("interop", ("numpy_transformer.interop",)),
    ("lab", ("numpy_transformer.analysis", "numpy_transformer.theory", "numpy_transformer.beyond_text",
             "numpy_transformer.benchmarks")),
    ("command line", ("numpy_transformer.cli",)),
)
# The deliberate cycles, both through the engine: the Tensor's operators (autograd.engine) apply
# the primitive ops, which are Functions of the engine (engine.py imports the ops once Function
# exists); and `Function.apply` and `Tensor.backward` hand the default path to the engine room's
# form, which builds Tensors (engine.py imports it at its end). Every other import points one way.
ENGINE_MODULE = "autograd.engine"
ENGINE_TIES = ("autograd.ops", "autograd.engine_room.reverse_mode")


def tier_of(module):
    """(index, name) of the tier a module belongs to: the longest prefix of TIERS it falls under."""
    best = None
    for index, (name, packages) in enumerate(TIERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and \
                    (best is None or len(package) > len(best[2])):
                best = (index, name, package)
    return best[:2]


def imported_modules(path, modules):
    """The modules of `modules` a source file imports, at the top or inside functions
    (`from package import submodule` imports the submodule, not the package's other names)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in modules:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
            names |= submodules if len(submodules) == len(node.names) else {node.module}
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name in modules)
    return names


def module_graph():
    """{module: the modules of this repository it imports}, over autograd and numpy_transformer."""
    modules = {}
    for package in (PACKAGE, ENGINE):
        for path in package.rglob("*.py"):
            parts = path.relative_to(package.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return {name: imported_modules(path, modules) - {name} for name, path in modules.items()}


def find_cycle(graph):
    """A list of modules that import each other in a ring, or None."""
    state, stack = {}, []

    def visit(name):
        state[name] = "open"
        stack.append(name)
        for imported in sorted(graph[name]):
            if state.get(imported) == "open":
                return stack[stack.index(imported):] + [imported]
            if imported not in state:
                cycle = visit(imported)
                if cycle:
                    return cycle
        state[name] = "done"
        stack.pop()
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def without_the_engine_ties(graph):
    return {name: imported - set(ENGINE_TIES) if name == ENGINE_MODULE else imported for name, imported in graph.items()}


def test_no_module_imports_itself_back_through_others():
    """No cycle in either package, once the engine's two named imports are set aside."""
    cycle = find_cycle(without_the_engine_ties(module_graph()))
    assert cycle is None, " → ".join(cycle)


@pytest.mark.parametrize("tie", ENGINE_TIES)
def test_each_engine_tie_leads_back_to_the_engine(tie):
    graph = module_graph()
    assert tie in graph[ENGINE_MODULE] and find_cycle({**graph, ENGINE_MODULE: {tie}}) is not None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def upward_imports(graph):
    """Lines naming each import of `graph` that points to a higher tier."""
    return [f"{name} ({tier_of(name)[1]}) imports {imported} ({tier_of(imported)[1]})"
            for name, imports in sorted(graph.items()) for imported in sorted(imports)
            if tier_of(imported)[0] > tier_of(name)[0]]


def test_dependencies_point_down_the_tiers():
    """autograd < core < run machinery < interop < lab < command line: the core (the thesis's
    model) imports nothing of the run machinery, interop, the lab or the command line, and
    autograd nothing of the model."""
    upward = upward_imports(module_graph())
    assert not upward, "\n".join(upward)


def test_every_subpackage_belongs_to_a_named_tier_and_says_its_purpose():
    for package in (PACKAGE, ENGINE):
        for init in package.rglob("__init__.py"):
            name = ".".join(init.parent.relative_to(package.parent).parts)
            assert tier_of(name) is not None, name
            docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert docstring, f"{init} has no docstring saying what the package is for"


def test_the_tier_test_sees_an_upward_import():
    graph = {"numpy_transformer.model": {"numpy_transformer.training.loop", "autograd.engine"},
             "autograd.optim": {"numpy_transformer.nn"}, "numpy_transformer.cli.train": {"numpy_transformer.model"}}
    assert upward_imports(graph) == [
        "autograd.optim (autograd) imports numpy_transformer.nn (core)",
        "numpy_transformer.model (core) imports numpy_transformer.training.loop (run machinery)"]


def test_no_two_modules_share_a_name():
    """A student who reads `linear.py` knows which one: module names are unique across both
    packages (__init__ and __main__ aside), and no module is named after a subpackage."""
    names = {}
    for package in (PACKAGE, ENGINE):
        for path in package.rglob("*.py"):
            if path.stem not in ("__init__", "__main__"):
                names.setdefault(path.stem, []).append(str(path.relative_to(package.parent)))
        for init in package.rglob("__init__.py"):
            if init.parent not in (PACKAGE, ENGINE):
                names.setdefault(init.parent.name, []).append(str(init.parent.relative_to(package.parent)))
    shared = {name: places for name, places in names.items() if len(places) > 1}
    assert not shared, shared


def test_the_attention_studio_is_a_room_of_the_lab_that_the_core_never_imports():
    """numpy_transformer.analysis.studio (the page of `attention --html`) is lab tier: only the lab
    and the command line import it, and its page files ship with the package."""
    graph = module_graph()
    studio = [name for name in graph if name.startswith("numpy_transformer.analysis.studio")]
    assert studio and {tier_of(name)[1] for name in studio} == {"lab"}
    importers = {name for name, imports in graph.items() if any(m.startswith("numpy_transformer.analysis.studio")
                                                                 for m in imports)}
    assert {tier_of(name)[1] for name in importers} <= {"lab", "command line"}, importers
    setup = (PACKAGE.parent / "setup.cfg").read_text(encoding="utf-8")
    assert "numpy_transformer.analysis.studio = studio.html, studio.css, studio.js" in setup
    assert all((PACKAGE / "analysis" / "studio" / name).is_file() for name in ("studio.html", "studio.css", "studio.js"))


def engine_room_modules_imported_outside_autograd(graph):
    """{module of the run machinery, the lab or the command line: the engine room's modules it
    imports by file} (the core swaps in its own equation's fused form by file, as autograd does)."""
    return {name: sorted(m for m in imports if m.startswith("autograd.engine_room."))
            for name, imports in graph.items()
            if tier_of(name)[1] not in ("autograd", "core") and any(m.startswith("autograd.engine_room.") for m in imports)}


def test_above_the_core_the_engine_room_is_reached_by_its_public_names_only():
    """The training machinery and the benchmarks use `autograd.engine_room`'s public names
    (batch_rows, share_updates, …), never a module of the room by file; and every public name
    resolves."""
    import autograd.engine_room as room
    assert engine_room_modules_imported_outside_autograd(module_graph()) == {}
    assert all(callable(getattr(room, name)) for name in room.__all__)
    with pytest.raises(AttributeError):
        getattr(room, "adam_update_in_blocks")


def test_the_wall_test_sees_an_import_by_file():
    graph = {"numpy_transformer.training.parallel": {"autograd.engine_room.fused_adam", "autograd.optim"},
             "numpy_transformer.training.loop": {"autograd.engine_room"}}
    assert engine_room_modules_imported_outside_autograd(graph) == {
        "numpy_transformer.training.parallel": ["autograd.engine_room.fused_adam"]}


def _text_io_without_an_encoding(path):
    """The lines of `path` that open, read or write text, or run a process in text mode, without
    naming the encoding: these take the locale's, which is cp1252 on Windows and ASCII or
    Latin-1 in some locales, where the corpora's, tokenizers' and printouts' letters are UTF-8."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        function = node.func
        if isinstance(function, ast.Name) and function.id == "open":
            mode = node.args[1] if len(node.args) > 1 else keywords.get("mode")
            binary = isinstance(mode, ast.Constant) and "b" in str(mode.value)
            if not binary and "encoding" not in keywords and len(node.args) < 4:
                found.append(node.lineno)
        elif isinstance(function, ast.Attribute) and function.attr in ("read_text", "write_text"):
            if "encoding" not in keywords and len(node.args) < (2 if function.attr == "write_text" else 1):
                found.append(node.lineno)
        elif isinstance(function, ast.Attribute) and function.attr in ("run", "Popen", "check_output") \
                and isinstance(function.value, ast.Name) and function.value.id == "subprocess":
            text = any(isinstance(keywords.get(name), ast.Constant) and keywords[name].value
                       for name in ("text", "universal_newlines"))
            if text and "encoding" not in keywords:
                found.append(node.lineno)
    return found


def test_the_library_and_the_examples_name_the_encoding_of_every_text_they_read_or_write():
    """Python's default text encoding is the locale's (PEP 597): cp1252 on Windows, where reading
    a UTF-8 corpus or tokenizer would misread every accented letter without an error. Every
    open(), read_text(), write_text() and text-mode subprocess of the package and the examples
    names its encoding (found with PYTHONWARNDEFAULTENCODING=1 first; this keeps it so)."""
    files = sorted([*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "examples").glob("*.py")])
    assert len(files) > 100
    unnamed = {str(path.relative_to(PACKAGE.parent)): lines for path in files
               if (lines := _text_io_without_an_encoding(path))}
    assert unnamed == {}, unnamed
