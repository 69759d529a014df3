"""Checks tgrad's --emit json output against include/tgrad/launch_protocol.schema.json
and evaluates every expression in it (tools/launch_protocol.py) for a sample launch:
each grid, shape and size must come out a non-negative integer, with no field left
for a person to read except "why".

    python3 tests/driver/check_protocol.py SCHEMA PROTOCOL.json...
"""
import collections
import json
import os
import sys

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import launch_protocol  # noqa: E402


def sample_env(protocol):
    # Every forward argument 7 (flags: 7 is true), every tensor 1000 elements, a 3 x 2 x 1 grid.
    args = collections.defaultdict(lambda: 7)
    params = {p["name"]: 5 for p in protocol["parameters"] if p.get("role") == "size" and p.get("value") is None}
    env = launch_protocol.LaunchEnv(args=args, numel=collections.defaultdict(lambda: 1000), grid=(3, 2, 1), params=params)
    launch_protocol.choose_launch_values(protocol, env)
    return env


def natural(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def main():
    schema = json.load(open(sys.argv[1]))
    validator = jsonschema.Draft202012Validator(schema)
    failures = 0
    for path in sys.argv[2:]:
        protocol = json.load(open(path))
        errors = sorted(validator.iter_errors(protocol), key=lambda e: list(e.path))
        for e in errors:
            print(f"{path}: {'/'.join(map(str, e.path))}: {e.message}")
        failures += len(errors)
        if errors:
            continue
        env = sample_env(protocol)
        checks = []
        for p in protocol["parameters"]:
            for d in p.get("shape", []):
                checks.append((p["name"] + ".shape", d))
            if p.get("value") is not None:
                checks.append((p["name"] + ".value", p["value"]))
        for b in protocol["scratch_buffers"]:
            checks.extend((b["name"] + ".shape", d) for d in b["shape"])
        for k in protocol.get("kernels", []):
            checks.extend((k["name"] + ".grid", d) for d in k["grid"])
            for name, a in k.get("arguments", {}).items():
                if not (isinstance(a, dict) and "buffer" in a):
                    checks.append((k["name"] + "." + name, a))
            call = k.get("call")
            if call:
                names = {p["name"] for p in protocol["parameters"]}
                for n in call["positional"] + call["keyword"]:
                    if n not in names:
                        print(f"{path}: {k['name']}: the call names '{n}', which is not a parameter")
                        failures += 1
        for what, expr in checks:
            try:
                value = launch_protocol.evaluate(expr, env)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                print(f"{path}: {what}: {expr!r} does not evaluate: {type(e).__name__}: {e}")
                failures += 1
                continue
            if not natural(value):
                print(f"{path}: {what}: {expr!r} is {value!r}, not a non-negative integer")
                failures += 1
        # What the plain gradient stores assume: a condition that evaluates to a boolean.
        for a in protocol.get("assumptions", []):
            if a["check"] is None:
                continue
            try:
                holds = launch_protocol.evaluate(a["check"], env)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                print(f"{path}: assumption {a['assumes']!r} does not evaluate: {type(e).__name__}: {e}")
                failures += 1
                continue
            if not isinstance(holds, bool):
                print(f"{path}: assumption {a['assumes']!r} is {holds!r}, not a boolean")
                failures += 1
    print(f"{len(sys.argv) - 2} protocols checked, {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
