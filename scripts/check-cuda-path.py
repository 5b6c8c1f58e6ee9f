"""scripts/check-cuda-path.py — the pytorch backend's CUDA path compiles.

    /usr/bin/python3 scripts/check-cuda-path.py BUILD_DIR CUDA_INCLUDE_DIR

The CUDA execution path (PTS_WITH_CUDA: streams, events, graphs, pinned
staging, CUDA shared memory) is built only against a LibTorch with CUDA,
which only the GPU host has; a mistake in it used to surface there, at the
cost of a scarce device call. This compiles each of its files here, from
BUILD_DIR's compile_commands.json (a build against the CPU LibTorch), with
PTS_WITH_CUDA=1 and -fsyntax-only: the same flags (-Werror included), the
CPU wheel's ATen/cuda and c10/cuda headers, the CUDA toolkit's runtime
headers (CUDA_INCLUDE_DIR) and tests/cuda_stubs for the math libraries the
toolkit here lacks. It type-checks, and links nothing. CMakeLists.txt
registers it as the ctest cuda_path_compiles where those headers exist.
"""
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ("src/backends/pytorch/torch_bridge.cc", "src/backends/pytorch/cuda_shm.c")


def syntax_only(entry, cuda_include):
    """The entry's compiler command, to check its file with CUDA on."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    return out[:1] + ["-fsyntax-only", "-DPTS_WITH_CUDA=1", "-isystem",
                      os.path.join(ROOT, "tests", "cuda_stubs"), "-isystem",
                      cuda_include] + out[1:]


def main():
    build, cuda_include = sys.argv[1], sys.argv[2]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = {os.path.realpath(e["file"]): e for e in json.load(f)}
    failed = 0
    for rel in FILES:
        entry = entries.get(os.path.realpath(os.path.join(ROOT, rel)))
        if entry is None:
            print("check-cuda-path: %s is not in %s/compile_commands.json" % (rel, build))
            failed += 1
            continue
        r = subprocess.run(syntax_only(entry, cuda_include), cwd=entry["directory"],
                           capture_output=True, text=True)
        print("check-cuda-path: %s with PTS_WITH_CUDA=1: %s" % (rel, "compiles" if r.returncode == 0
                                                                 else "FAILS"))
        if r.returncode:
            sys.stdout.write(r.stderr)
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
