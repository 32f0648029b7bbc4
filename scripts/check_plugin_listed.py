"""Read `beyondagent plugins --json` on stdin; exit non-zero unless plugin argv[1] is listed ok."""

import json
import sys

name = sys.argv[1]
found = [plugin for plugin in json.load(sys.stdin) if plugin["name"] == name]
if not found or found[0]["status"] != "ok":
    sys.exit(f"plugin {name}: {found[0] if found else 'not listed'}")
plugin = found[0]
print(f"plugin {name}: ok ({plugin['distribution']} {plugin['version']}, provides {plugin['provides']})")
