"""numpy_transformer.training.allocator: freed memory is reused, not mapped again page by page."""
import subprocess
import sys

import pytest

from numpy_transformer.training.allocator import reuse_freed_memory

# Each cycle allocates three arrays of `mb` MB, writes them and frees them, twenty times over; it
# prints the minor page faults the cycles took. Without the setting glibc maps them afresh every
# cycle (here about 340 faults an array, the kernel mapping several pages a fault); with it, they
# come back from the heap already mapped.
CYCLES = """
import resource, sys
import numpy as np
from numpy_transformer.training.allocator import reuse_freed_memory
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
mb = int(sys.argv[2])
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
arrays = [np.ones(mb * 2 ** 18, np.float32) for _ in range(3)]
del arrays
before = faults()
for _ in range(20):
    arrays = [np.ones(mb * 2 ** 18, np.float32) for _ in range(3)]
    del arrays
print(faults() - before)
"""


def page_faults(setting, mb):
    result = subprocess.run([sys.executable, "-c", CYCLES, setting, str(mb)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setting is glibc's")
@pytest.mark.parametrize("mb", [6, 20])
def test_freed_arrays_are_reused_without_page_faults(mb):
    arrays = 20 * 3
    assert page_faults("default", mb) > 50 * arrays                 # glibc's default: mapped again each cycle
    assert page_faults("reuse", mb) < arrays                        # not even one fault an array


def test_the_setting_reports_whether_it_took():
    import platform

    assert reuse_freed_memory() is (platform.libc_ver()[0] == "glibc")


def test_every_command_runs_with_the_setting(monkeypatch, capsys):
    import numpy_transformer.cli as cli

    calls = []
    monkeypatch.setattr(cli, "reuse_freed_memory", lambda: calls.append(True))
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert calls == [True]
