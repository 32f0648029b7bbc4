"""`beyondagent view`: a local web app over run directories (see docs/inspect.md).

`command` (the CLI), `app` (Starlette routes), `index` (the incremental sqlite index of
`episodes.jsonl`), `queries` (filters, sorting, paging), `pages` / `assets` / `charts` (HTML).
"""
