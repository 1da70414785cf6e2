"""Builds the `synapse` Python package: the pure-Python synapse/ folder plus the
extension module synapse._synapse, which CMake builds from this repository
(configured with SYNAPSE_BUILD_PYTHON=ON, so the static engine libraries are
compiled -fPIC, for the interpreter running this script).

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation ./python

Nothing is fetched: setuptools, wheel, pybind11 and CMake come from Debian.
The CMake build directory is <repo>/build-python (SYNAPSE_PYTHON_BUILD_DIR
overrides it), kept between installs so a reinstall only recompiles what
changed. An existing build directory keeps its build type and options (only
SYNAPSE_BUILD_PYTHON is turned on and the interpreter set).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build = Path(os.environ.get("SYNAPSE_PYTHON_BUILD_DIR", ROOT / "build-python"))
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DSYNAPSE_BUILD_PYTHON=ON",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if not (build / "CMakeCache.txt").is_file():
            # A fresh tree builds only what the module needs. An existing one
            # keeps its own settings: scripts/test.sh points this at its test
            # build (configured with SYNAPSE_BUILD_PYTHON=ON), so the engine is
            # compiled once for the tests and the module alike.
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DSYNAPSE_BUILD_TESTS=OFF"]
            if shutil.which("ccache"):
                configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "_synapse",
                               "-j", str(os.cpu_count() or 1)])
        built = sorted((build / "python").glob("_synapse*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _synapse*.so in {build / 'python'}")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="synapse",
    version="0.1.0",
    description="GGUF Llama-family models on the CPU, with llama-cpp-python's API",
    packages=["synapse"],
    package_data={"synapse": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("synapse._synapse")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={"jinja": ["jinja2"]},
    zip_safe=False,
)
