# scripts/tritonserver.sh — sourced: NVIDIA's tritonserver r25.07 with its
# real PyTorch backend, the yardstick of bench/triton and scripts/triton-qa.sh.
#
# In: ROOT (the checkout), PY (the venv's python), TRITON_HOME (where it is
# built and kept; git-ignored), TRITON_LIBTORCH (venv, the default: the
# backend built again against the venv's LibTorch, the one ptserve links, so
# both servers run the same LibTorch; debian: the build's Debian 1.13), and,
# when no build is there yet, MIRROR (the fetched Triton sources) and
# TRITON_BUILD_SCRIPT (default ../shared/tools/build-triton.sh: Debian 12,
# CPU only, about 15 minutes on 2 cores). TRITONSERVER and TRITON_BACKENDS,
# when set, name another build and nothing is built.
# Out: TRITONSERVER, TRITON_BACKENDS, TORCH_DIR, triton_libtorch (words for
# meta files). Needs a log function. Returns 1 when it can not provide one.
provide_tritonserver() {
  TORCH_DIR="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
  triton_libtorch=
  if [ -z "$TRITONSERVER" ]; then
    if [ ! -x "$TRITON_HOME/install/bin/tritonserver" ]; then
      script="${TRITON_BUILD_SCRIPT:-$ROOT/../shared/tools/build-triton.sh}"
      if [ ! -f "$script" ] || [ -z "${MIRROR:-}" ]; then
        echo "tritonserver.sh: no tritonserver in $TRITON_HOME; set MIRROR (the fetched Triton sources)" \
          "and TRITON_BUILD_SCRIPT (now '$script') to build it, or TRITONSERVER and" \
          "TRITON_BACKENDS to use another" >&2
        return 1
      fi
      log "building tritonserver r25.07 with its PyTorch backend into $TRITON_HOME"
      TRITONBUILD="$TRITON_HOME" MIRROR="$MIRROR" bash "$script" >"$TRITON_HOME.build.log" 2>&1
    fi
    TRITONSERVER="$TRITON_HOME/install/bin/tritonserver"
    TRITON_BACKENDS="$TRITON_HOME/install/backends"
    triton_libtorch="Debian's libtorch 1.13 ($(dpkg-query -W -f '${Version}' libtorch1.13 2>/dev/null || echo '?'))"
    if [ "$TRITON_LIBTORCH" = venv ]; then
      # Triton's PyTorch backend, built again against the venv's LibTorch.
      venv_backends="$TRITON_HOME/backends-venv"
      if [ ! -f "$venv_backends/pytorch/libtriton_pytorch.so" ]; then
        log "building Triton's PyTorch backend against $TORCH_DIR"
        T="$TRITON_HOME"
        cmake -S "$T/src/pytorch_backend" -B "$T/build/pt-venv" -DCMAKE_BUILD_TYPE=Release \
          -DFETCHCONTENT_SOURCE_DIR_REPO-COMMON="$T/src/common" \
          -DFETCHCONTENT_SOURCE_DIR_REPO-CORE="$T/src/core" \
          -DFETCHCONTENT_SOURCE_DIR_REPO-BACKEND="$T/src/backend" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
          -DProtobuf_DIR="$T/shim/protobuf" -Dprotobuf_DIR="$T/shim/protobuf" -Dre2_DIR="$T/shim/re2" \
          -DTRITON_MIN_CXX_STANDARD=17 -DTRITON_ENABLE_GPU=OFF -DTRITON_PYTORCH_ENABLE_TORCHVISION=OFF \
          -DPython3_EXECUTABLE=/usr/bin/python3 -DPython3_INCLUDE_DIR=/usr/include/python3.11 \
          -DPython3_LIBRARY=/usr/lib/x86_64-linux-gnu/libpython3.11.so \
          -DTRITON_PYTORCH_INCLUDE_PATHS="$TORCH_DIR/include;$TORCH_DIR/include/torch/csrc/api/include" \
          -DTRITON_PYTORCH_LIB_PATHS="$TORCH_DIR/lib" >"$T/pt-venv.log" 2>&1
        cmake --build "$T/build/pt-venv" --target triton-pytorch-backend -j"${JOBS:-2}" >>"$T/pt-venv.log" 2>&1
        mkdir -p "$venv_backends/pytorch"
        cp "$T/build/pt-venv/libtriton_pytorch.so" "$venv_backends/pytorch/"
      fi
      TRITON_BACKENDS="$venv_backends"
      triton_libtorch="the venv's LibTorch $("$PY" -c 'import torch; print(torch.__version__)') (the backend built against it)"
    fi
  fi
}
