"""Host details are taken out of what records show (harness/redact.py)."""

from __future__ import annotations

import os
import socket
import sys

from gpuarena.harness.redact import redact


def test_install_paths_run_folders_home_and_host_name_are_replaced():
    site = next(p for p in sys.path if p.endswith("site-packages"))
    text = (
        f'File "{site}/torch/nn/functional.py", line 3\n'
        f"  in /tmp/gpuarena-run-k2j3h4/work/solution/solve.py\n"
        f"shared: /dev/shm/gpuarena-ab12cd34/t1; home {os.path.expanduser('~')}/.cache; "
        f"host {socket.gethostname()}."
    )
    shown = redact(text)
    assert site not in shown and "<site-packages>/torch/nn/functional.py" in shown
    assert "gpuarena-run-k2j3h4" not in shown and "<run>/work/solution/solve.py" in shown
    assert "gpuarena-ab12cd34" not in shown
    assert os.path.expanduser("~") + "/" not in shown
    assert f"host {socket.gethostname()}." not in shown and "host <host>." in shown


def test_text_without_host_details_is_left_alone():
    text = "output y: 3 of 64000 elements outside atol=1e-05; worst at [3, 4]"
    assert redact(text) == text
    assert redact("") == ""
