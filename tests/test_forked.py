"""The forked children of the test fixtures (tests/fixtures/forked.py): a `WarmInterpreter`'s
child runs code as ``python -c`` would, in its own folder, and reports how it ended."""

import sys

import pytest

from tests.fixtures.forked import WarmInterpreter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")


@pytest.fixture(scope="module")
def warm():
    with WarmInterpreter(preload=["json"]) as interpreter:  # the standard library only: fast
        yield interpreter


def test_a_child_runs_code_as_python_c_would_in_its_folder(warm, tmp_path):
    code = (
        "import os, pickle, sys\n"
        "def f(): pass\n"
        "print(os.getcwd(), sys.argv[1:], __name__, sys.modules['__main__'].f is f)\n"
        "print(pickle.loads(pickle.dumps(f)) is f, sys.stdin.read() == '', 'json' in sys.modules)\n"
        "print('to stderr', file=sys.stderr)\n"
    )
    status, out, err = warm.run(code, ["a", 1], cwd=tmp_path)
    assert status == 0, err
    assert out.splitlines() == [f"{tmp_path} ['a', '1'] __main__ True", "True True True"]
    assert err == "to stderr\n"


@pytest.mark.parametrize(
    ("code", "status", "message", "timeout"),
    [
        ("raise SystemExit(3)", 3, "", 60),
        ("import sys; sys.exit('no')", 1, "", 60),
        ("1 / 0", 1, "ZeroDivisionError", 60),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9, "", 60),
        ("import time; time.sleep(60)", "forked process", "", 0.25),  # killed at its timeout
    ],
)
def test_a_child_that_fails_says_how(warm, code, status, message, timeout):
    returned, _, err = warm.run(code, timeout=timeout)
    assert returned == status if isinstance(status, int) else status in returned
    assert message in err
    assert warm.run("print('next')")[:2] == (0, "next\n")  # and the interpreter serves on


def test_an_interpreter_that_ended_is_named(tmp_path):
    interpreter = WarmInterpreter(preload=["no_such_module_here"])
    with pytest.raises(RuntimeError, match="(?s)the warm interpreter ended: .*no_such_module_here"):
        interpreter.run("print(1)")
    interpreter.close()
