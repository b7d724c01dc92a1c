#!/usr/bin/env python3
"""Lints and renders the Helm chart with the real Helm engine (Helm v4, bundled as a native
library by the PyPI package helm-python-sdk), for tests/chart.rs.

Usage:
  render.py check
      Exit 0 when helm_python imports, 3 when it does not.
  render.py lint CHART [--values FILE]... [--kube-version vX.Y.Z]
      Lints strictly: any warning or error fails (exit 1). Informational findings are printed.
  render.py render CHART OUT_DIR [--values FILE]... [--set-json KEY=JSON]...
                   [--release NAME] [--namespace NS]
      Renders the templates as an install would (values checked against values.schema.json).
      Writes OUT_DIR/manifests.yaml (every rendered manifest an install applies: NOTES.txt and
      hooks excluded), OUT_DIR/hooks.yaml (the hooks, e.g. `helm test` Pods), OUT_DIR/NOTES.txt
      and OUT_DIR/crds.yaml (the chart's crds/). A rendering or schema failure exits 2 with
      Helm's message on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

try:
    import helm_python as helm
except ImportError as exc:  # pragma: no cover - exercised when the package is missing
    helm = None
    IMPORT_ERROR = exc
else:
    IMPORT_ERROR = None

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}

# A manifest carrying this annotation is a hook, which Helm creates at its event rather than
# with the release (https://helm.sh/docs/topics/charts_hooks/).
HOOK = re.compile(r"^\s+helm\.sh/hook:", re.MULTILINE)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merges `override` into `base` the way Helm coalesces several values files."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_values(files: list[str], set_json: list[str]) -> dict[str, Any] | None:
    """The user-supplied values: files in order, then --set-json expressions."""
    values: dict[str, Any] = {}
    for path in files:
        with open(path, encoding="utf-8") as handle:
            values = merge(values, helm.values_from_yaml(handle.read()))
    for expression in set_json:
        values = merge(values, helm.parse_set_json(expression))
    return values or None


def cmd_lint(args: argparse.Namespace) -> int:
    values = load_values(args.values, [])
    report = helm.lint(
        args.chart,
        values,
        strict=True,
        namespace=args.namespace,
        kube_version=args.kube_version,
    )
    failed = False
    for message in report.get("messages", []):
        severity = message.get("severity", 0)
        label = SEVERITY.get(severity, str(severity))
        print(f"[{label}] {message.get('path')}: {message.get('error')}".rstrip())
        if severity >= 2:
            failed = True
    for error in report.get("errors", []):
        print(f"[ERROR] {error}".rstrip())
        failed = True
    if report.get("total_charts_linted", 0) < 1:
        print("[ERROR] no chart was linted")
        failed = True
    print("lint: FAILED" if failed else "lint: passed")
    return 1 if failed else 0


def cmd_render(args: argparse.Namespace) -> int:
    values = load_values(args.values, args.set_json)
    os.makedirs(args.out_dir, exist_ok=True)
    with helm.Chart.load(args.chart) as chart:
        try:
            rendered = chart.render(
                values,
                name=args.release,
                namespace=args.namespace,
                revision=1,
                is_install=True,
            )
        except helm.HelmError as exc:
            print(f"render failed: {exc}", file=sys.stderr)
            return 2
        crds = chart.crds
    documents = []
    hooks = []
    notes = ""
    for path in sorted(rendered):
        text = rendered[path]
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        if not text.strip():
            continue
        (hooks if HOOK.search(text) else documents).append(f"# Source: {path}\n{text.strip()}\n")
    with open(os.path.join(args.out_dir, "manifests.yaml"), "w", encoding="utf-8") as out:
        out.write("---\n".join(documents))
    with open(os.path.join(args.out_dir, "hooks.yaml"), "w", encoding="utf-8") as out:
        out.write("---\n".join(hooks))
    with open(os.path.join(args.out_dir, "NOTES.txt"), "w", encoding="utf-8") as out:
        out.write(notes)
    with open(os.path.join(args.out_dir, "crds.yaml"), "w", encoding="utf-8") as out:
        out.write(
            "---\n".join(f"# Source: crds/{c['filename']}\n{c['data'].strip()}\n" for c in crds)
        )
    summary = {"templates": len(documents), "hooks": len(hooks), "crds": len(crds)}
    print(json.dumps(summary))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    lint = sub.add_parser("lint")
    lint.add_argument("chart")
    lint.add_argument("--values", action="append", default=[])
    lint.add_argument("--namespace", default="mailtarget-system")
    lint.add_argument("--kube-version", default=None)
    render = sub.add_parser("render")
    render.add_argument("chart")
    render.add_argument("out_dir")
    render.add_argument("--values", action="append", default=[])
    render.add_argument("--set-json", action="append", default=[])
    render.add_argument("--release", default="mailtarget")
    render.add_argument("--namespace", default="mailtarget-system")
    args = parser.parse_args()

    if helm is None:
        print(f"helm_python is not importable: {IMPORT_ERROR}", file=sys.stderr)
        return 3
    if args.command == "check":
        print(f"helm-python-sdk {helm.__version__}, Helm {helm.helm_sdk_version()}")
        return 0
    if args.command == "lint":
        return cmd_lint(args)
    return cmd_render(args)


if __name__ == "__main__":
    sys.exit(main())
