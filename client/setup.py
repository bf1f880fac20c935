"""Generates the gRPC stubs into the wheel at build time, from the proto this checkout carries, and takes the
version from the server's pyproject.toml: one number for the server and its client.

protoc writes `from gpuadvisor.v1 import advisor_pb2` into the service stubs, which only works with the proto
root on sys.path; the stubs here live in `gpu_advisor_client.v1`, so that one import becomes relative.
"""

from __future__ import annotations

import re
import tempfile
from email.parser import Parser
from importlib import resources
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
PROTO_ROOT = HERE / "protos"  # a link to ../protos in the repository; real files in an sdist
PROTO_PACKAGE = Path("gpuadvisor/v1")
TARGET = Path("gpu_advisor_client/v1")
SIBLING_IMPORT = re.compile(r"^from gpuadvisor\.v1 import (\w+_pb2) as ", re.M)
SERVER_PYPROJECT = HERE.parent / "pyproject.toml"
SERVER_NAME = "gpu-advisor"


def version() -> str:
    """The server's version: [project] version of the repository's pyproject.toml (this directory's parent).

    An sdist has no parent repository; it carries the version it was made with in PKG-INFO.
    """
    if SERVER_PYPROJECT.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: tomli is a build requirement there (pyproject.toml)
            import tomli as tomllib
        project = tomllib.loads(SERVER_PYPROJECT.read_text()).get("project", {})
        if project.get("name") == SERVER_NAME and project.get("version"):
            return str(project["version"])
    pkg_info = HERE / "PKG-INFO"
    if pkg_info.is_file():
        return Parser().parsestr(pkg_info.read_text())["Version"]
    raise SystemExit(f"no version: {SERVER_PYPROJECT} is not {SERVER_NAME}'s pyproject.toml and there is no PKG-INFO;"
                     " build the client from the repository (pip install ./client) or from its sdist")


def generate(out: Path) -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml), not a runtime one

    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PROTO_PACKAGE).glob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {PROTO_ROOT / PROTO_PACKAGE}")
    well_known = resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}", *protos]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {protos}")
        out.mkdir(parents=True, exist_ok=True)
        for made in sorted((Path(tmp) / PROTO_PACKAGE).iterdir()):
            text = made.read_text()
            if made.name.endswith("_pb2_grpc.py"):
                text, n = SIBLING_IMPORT.subn(r"from . import \1 as ", text)
                if n == 0:
                    raise SystemExit(f"{made.name}: protoc's import of its messages changed shape; fix setup.py")
            (out / made.name).write_text(text)
    (out / "__init__.py").write_text(f'"""Generated from {", ".join(protos)} when this package was built."""\n')


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        generate(Path(self.build_lib) / TARGET)


setup(version=version(), cmdclass={"build_py": BuildPyWithStubs})
