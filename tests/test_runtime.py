"""The allocator set-up of heavy commands, checked in the process it changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def _probe(env: dict[str, str]) -> str:
    code = ("import json, sys; from ablate.runtime import apply_fast_allocator, allocator_in_use;"
            "apply_fast_allocator(['train']); print(json.dumps(allocator_in_use()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_heavy_commands_tune_glibc_malloc_by_default():
    assert _probe({"ABLATE_ALLOCATOR": "auto"}) == "glibc (tuned)"


def test_system_allocator_is_left_alone_when_asked():
    assert _probe({"ABLATE_ALLOCATOR": "system"}) == "glibc"
