"""The package's shape: the command line loads no NumPy before it fixes the BLAS thread count,
`--threads` reaches BLAS, and no module of numpy_transformer imports itself back in a cycle."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import numpy_transformer
from numpy_transformer.cli.common import BLAS_THREAD_VARIABLES

PACKAGE = Path(numpy_transformer.__file__).parent
CLEAN_ENVIRONMENT = {name: value for name, value in os.environ.items()
                     if name not in (*BLAS_THREAD_VARIABLES, "OPENBLAS_THREAD_TIMEOUT")}


def run_python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=CLEAN_ENVIRONMENT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_importing_the_command_line_does_not_import_numpy():
    assert run_python("import sys, numpy_transformer.cli; print('numpy' in sys.modules)") == "False"


@pytest.mark.parametrize("threads", [1, 2])
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
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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


def test_no_module_imports_itself_back_through_others():
    cycle = find_cycle(module_graph())
    assert cycle is None, " → ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_model_does_not_depend_on_the_run_machinery():
    """Dependencies point down: the thesis-facing modules never import training/ or cli/."""
    graph = module_graph()
    thesis_facing = [name for name in graph if not name.startswith(("numpy_transformer.training",
                                                                      "numpy_transformer.cli",
                                                                      "numpy_transformer.analysis",
                                                                      "numpy_transformer.benchmarks"))]
    for name in thesis_facing:
        upward = {imported for imported in graph[name]
                  if imported.startswith(("numpy_transformer.training", "numpy_transformer.cli"))}
        assert not upward, f"{name} imports {sorted(upward)}"


def test_the_engine_imports_nothing_of_the_model():
    import autograd

    engine = Path(autograd.__file__).parent
    for path in engine.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | \
            {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not any(name.startswith("numpy_transformer") for name in imported), path
