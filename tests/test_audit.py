"""The cheap subset of the hostile-user audit (benchmarks/audit.py --quick): every eighth bad command line of
every entry point and every eighth bad API call, two interrupts, a closed pipe and two determinism pairs.
Each must end in a report, or one line and exit status 2 (a KdaInputError for the API), within the audit's
time limit; never a traceback, a hang, a silently accepted bad input or lost results. The whole audit,
deliberate bugs included, is `python benchmarks/audit.py` (slow, outside CI)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_quick_audit_finds_no_defect():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "audit.py"), "--quick", "--quiet",
                        "--timeout", "300"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " 0 defects" in p.stdout
