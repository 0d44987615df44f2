#!/bin/bash
# Exits 2 unless Debian's libblas.so.3 alternative is OpenBLAS: torch's dense layers and
# matmuls run on it, and on the reference BLAS (libblas3, what python3-torch pulls in alone)
# they are ~10x slower, which would make any comparison with PyTorch meaningless.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null)
case $blas in
  *openblas*) exit 0 ;;
esac
echo "torch would run on the reference BLAS (libblas.so.3 is ${blas:-missing}), not PyTorch's best" \
     "configuration: apt-get install libopenblas0-openmp" >&2
exit 2
