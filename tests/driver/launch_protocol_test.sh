#!/usr/bin/env bash
# Runs tests/driver/check_protocol.py with Debian's Python, which has
# python3-jsonschema (tools/setup installs it): SCHEMA PROTOCOL.json...
set -eu
exec /usr/bin/python3 tests/driver/check_protocol.py "$@"
