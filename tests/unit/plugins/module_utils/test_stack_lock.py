import hashlib
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import stack_lock


def wheel(directory, filename, content=b"wheel"):
    path = os.path.join(directory, filename)
    with open(path, "wb") as handle:
        handle.write(content + filename.encode())
    return path


class FakePip:
    """pip download: the requested local wheels copied, plus the closure's wheels 'from the index'."""

    def __init__(self, closure, returncode=0, output=""):
        self.closure, self.returncode, self.output, self.calls = closure, returncode, output, []

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        dest = argv[argv.index("--dest") + 1]
        for arg in argv:
            if arg.endswith(".whl") and os.path.isfile(arg):
                shutil.copy(arg, dest)
        for filename in self.closure:
            wheel(dest, filename, b"index")
        return subprocess.CompletedProcess(argv, self.returncode, stdout=self.output)


@pytest.fixture
def built(tmp_path):
    directory = tmp_path / "built"
    directory.mkdir()
    return [
        wheel(str(directory), "torch-2.9.0+git1a2b3c4d-cp311-cp311-linux_x86_64.whl"),
        wheel(str(directory), "vllm-0.11.0+rocm7.0.2-cp311-cp311-linux_x86_64.whl"),
    ]


def test_lock_pins_every_wheel_with_its_hash_sorted(tmp_path, built):
    pip = FakePip(["typing_extensions-4.15.0-py3-none-any.whl", "Jinja2-3.1.6-py3-none-any.whl"])
    info, changed = stack_lock.lock("/venv/bin/python", built, ["--no-index"], str(tmp_path / "locks"), "k1", pip)
    assert changed
    with open(info["path"]) as handle:
        text = handle.read()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert [line.split("==")[0] for line in lines] == ["jinja2", "torch", "typing-extensions", "vllm"]
    with open(built[0], "rb") as handle:
        torch_hash = hashlib.sha256(handle.read()).hexdigest()
    assert "torch==2.9.0+git1a2b3c4d --hash=sha256:%s" % torch_hash in lines
    assert info["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert info["packages"]["typing-extensions"]["version"] == "4.15.0"
    # pip ran with the index arguments and the wheels only, and wrote no wheel beside the lock.
    assert pip.calls[0][-3:] == ["--no-index"] + built
    assert "--only-binary=:all:" in pip.calls[0]
    assert sorted(os.listdir(tmp_path / "locks" / "k1")) == ["stack-lock.json", "stack-lock.txt"]


def test_published_lock_is_reused(tmp_path, built):
    locks = str(tmp_path / "locks")
    first, _changed = stack_lock.lock(
        "/venv/bin/python", built, [], locks, "k1", FakePip(["six-1.17.0-py2.py3-none-any.whl"])
    )
    pip = FakePip(["six-1.17.0-py2.py3-none-any.whl"])
    again, changed = stack_lock.lock("/venv/bin/python", built, [], locks, "k1", pip)
    assert not changed and pip.calls == [] and again == first
    with open(os.path.join(locks, "k1", "stack-lock.json")) as handle:
        assert json.load(handle)["sha256"] == first["sha256"]


def test_unresolvable_closure_fails_with_pips_words_and_publishes_nothing(tmp_path, built):
    pip = FakePip([], returncode=1, output="ERROR: No matching distribution found for fastapi>=0.115.0")
    with pytest.raises(stack_lock.LockError, match="No matching distribution found for fastapi"):
        stack_lock.lock("/venv/bin/python", built, [], str(tmp_path / "locks"), "k1", pip)
    assert os.listdir(tmp_path / "locks") == []


def test_an_sdist_in_the_closure_is_refused(tmp_path, built):
    pip = FakePip(["amdsmi-26.0.0.tar.gz"])
    with pytest.raises(stack_lock.LockError, match="amdsmi-26.0.0.tar.gz is not a wheel"):
        stack_lock.lock("/venv/bin/python", built, [], str(tmp_path / "locks"), "k1", pip)


def test_a_second_torch_from_the_index_is_refused(tmp_path, built):
    # The CUDA torch of the index beside the built ROCm one: the failure this lock exists to stop.
    pip = FakePip(["torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
    with pytest.raises(stack_lock.LockError, match="two wheels of torch"):
        stack_lock.lock("/venv/bin/python", built, [], str(tmp_path / "locks"), "k1", pip)


def test_missing_built_wheel(tmp_path):
    with pytest.raises(stack_lock.LockError, match="missing on the build host"):
        stack_lock.lock(
            "/venv/bin/python", [str(tmp_path / "gone.whl")], [], str(tmp_path / "locks"), "k1", FakePip([])
        )


@pytest.mark.parametrize(
    "filename, identity",
    [
        ("Jinja2-3.1.6-py3-none-any.whl", ("jinja2", "3.1.6")),
        ("pytorch_triton_rocm-3.5.0+gitabc-cp311-cp311-linux_x86_64.whl", ("pytorch-triton-rocm", "3.5.0+gitabc")),
        ("numpy-2.3.4-1-cp311-cp311-manylinux_2_28_x86_64.whl", ("numpy", "2.3.4")),
    ],
)
def test_wheel_identity(filename, identity):
    assert stack_lock.wheel_identity(filename) == identity


def test_the_index_triton_beside_the_built_one_is_refused(tmp_path, built):
    # xgrammar requires "triton": built as pytorch-triton-rocm, the closure would add the index's CUDA Triton.
    built.append(wheel(os.path.dirname(built[0]), "pytorch_triton_rocm-3.5.0+gitabc-cp311-cp311-linux_x86_64.whl"))
    pip = FakePip(["triton-3.5.0-cp311-cp311-manylinux_2_27_x86_64.whl"])
    with pytest.raises(stack_lock.LockError, match="takes triton triton-3.5.0-cp311.*triton_wheel_name"):
        stack_lock.lock(
            "/venv/bin/python",
            built,
            [],
            str(tmp_path / "locks"),
            "k1",
            pip,
            conflicting=["torch", "torchvision", "triton", "pytorch-triton-rocm"],
        )
    assert os.listdir(tmp_path / "locks") == []


def test_a_lock_whose_built_wheel_was_rebuilt_is_resolved_again(tmp_path, built):
    locks = str(tmp_path / "locks")
    first, _changed = stack_lock.lock(
        "/venv/bin/python", built, [], locks, "k1", FakePip(["six-1.17.0-py2.py3-none-any.whl"])
    )
    # The torch cache entry was removed and built again under the same key: same file name, other bytes.
    wheel(os.path.dirname(built[0]), os.path.basename(built[0]), b"rebuilt")
    pip = FakePip(["six-1.17.0-py2.py3-none-any.whl"])
    again, changed = stack_lock.lock("/venv/bin/python", built, [], locks, "k1", pip)
    assert changed and len(pip.calls) == 1
    with open(built[0], "rb") as handle:
        assert again["packages"]["torch"]["sha256"] == hashlib.sha256(handle.read()).hexdigest()
    assert again["packages"]["torch"]["sha256"] != first["packages"]["torch"]["sha256"]
    assert again["packages"]["vllm"] == first["packages"]["vllm"]
    assert sorted(os.listdir(locks)) == ["k1"]
    assert stack_lock.lock("/venv/bin/python", built, [], locks, "k1", FakePip([]))[1] is False


def test_the_lock_names_the_python_abi_and_is_made_again_for_another(tmp_path, built):
    pip = FakePip(["jinja2-3.1.6-py3-none-any.whl"])
    locks = str(tmp_path / "locks")
    info, changed = stack_lock.lock(
        "/venv/bin/python", built, [], locks, "k1", pip, python_abi="cp311-linux_x86_64-glibc2.36"
    )
    assert changed and info["python_abi"] == "cp311-linux_x86_64-glibc2.36"
    with open(info["path"]) as handle:
        assert "# For the Python ABI cp311-linux_x86_64-glibc2.36 only.\n" in handle.read()
    assert (
        stack_lock.lock("/venv/bin/python", built, [], locks, "k1", pip, python_abi="cp311-linux_x86_64-glibc2.36")[1]
        is False
    )
    # The same key locked by a build host of another ABI (a key made before the ABI was part of it): made again.
    info, changed = stack_lock.lock(
        "/venv/bin/python", built, [], locks, "k1", pip, python_abi="cp313-linux_x86_64-glibc2.41"
    )
    assert changed and info["python_abi"] == "cp313-linux_x86_64-glibc2.41"
    assert stack_lock.read_lock(locks, "k1")["python_abi"] == "cp313-linux_x86_64-glibc2.41"


def test_a_lock_published_without_the_abi_is_made_again_with_it(tmp_path, built):
    pip = FakePip([])
    locks = str(tmp_path / "locks")
    assert "python_abi" not in stack_lock.lock("/venv/bin/python", built, [], locks, "k1", pip)[0]
    info, changed = stack_lock.lock(
        "/venv/bin/python", built, [], locks, "k1", pip, python_abi="cp311-linux_x86_64-glibc2.36"
    )
    assert changed and info["python_abi"] == "cp311-linux_x86_64-glibc2.36"
